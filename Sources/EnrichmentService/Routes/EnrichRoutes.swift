import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// `POST /v1/enrich`: the extension flow for one payload and device.
struct EnrichRoutes {
    let state: ServiceState

    func register(on router: RouteRecorder) {
        router.post("/v1/enrich") { request, _ in
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            let input = try EnrichRequest(document)
            let started = ContinuousClock.now
            let result = try await state.enricher.enrich(
                deviceId: input.deviceId, payload: input.payload,
                at: input.at, mode: input.mode)
            state.metrics.enrichDuration(ContinuousClock.now - started)
            if let ms = result.placesMilliseconds { state.metrics.placesDuration(.microseconds(Int64(ms * 1000))) }
            state.metrics.outcome(result.outcome.rawValue, provider: result.placesProvider ?? "none")
            return JSONIO.response(bytes: result.encodedJSON())
        }
    }
}

/// The body of `POST /v1/enrich`, validated field by field.
struct EnrichRequest {
    var deviceId: String
    var payload: NotificationPayload
    var at: Date?
    var mode: BodyMode?

    init(_ document: JSONValue) throws {
        guard case .object(let fields) = document else {
            throw APIError.invalid(
                "invalid_request", "body must be a JSON object {\"device_id\", \"payload\", \"at\"?}")
        }
        guard let idValue = fields["device_id"] else {
            throw APIError.invalid("invalid_request", "device_id is required")
        }
        guard let id = idValue.stringValue else {
            throw APIError.invalid("invalid_request", "device_id must be a string, found \(idValue.typeName)")
        }
        if let problem = DeviceID.problem(with: id) { throw APIError.invalid("invalid_device_id", problem) }
        deviceId = id
        guard let payloadValue = fields["payload"] else {
            throw APIError.invalid("invalid_request", "payload is required (the APNs payload, a JSON object)")
        }
        do { payload = try NotificationPayload(json: payloadValue) } catch {
            throw APIError.invalid("invalid_payload", error.description)
        }
        switch fields["at"] {
        case nil, .null?: at = nil
        case .int(let seconds)?: at = try Self.instant(Double(seconds), raw: String(seconds))
        case .double(let seconds)?: at = try Self.instant(seconds, raw: "\(seconds)")
        case let other?:
            throw APIError.invalid(
                "invalid_request", "at must be epoch seconds (a number), found \(other.typeName)",
                field: "at")
        }
        switch fields["mode"] {
        case nil, .null?: mode = nil
        case .string(let raw)?:
            guard let parsed = BodyMode(rawValue: raw) else {
                throw APIError.invalid("invalid_request", "mode '\(raw)' is unknown; use default or woosmap")
            }
            mode = parsed
        case let other?: throw APIError.invalid("invalid_request", "mode must be a string, found \(other.typeName)")
        }
    }

    /// `at` as an instant, refused outside the range a verdict can be given for.
    static func instant(_ seconds: Double, raw: String) throws -> Date {
        let range = StalenessPolicy.evaluableSeconds
        // Judged on whole seconds, as the staleness rule is: any instant within the last second is accepted.
        guard range.contains(seconds.rounded(.down)) else {
            throw APIError.invalid(
                "invalid_request",
                "at \(raw) is outside the accepted range: epoch seconds from \(Int64(range.lowerBound)) (1970-01-01T00:00:00Z) to \(Int64(range.upperBound)) (9999-12-31T23:59:59Z)",
                field: "at")
        }
        return Date(timeIntervalSince1970: seconds)
    }
}
