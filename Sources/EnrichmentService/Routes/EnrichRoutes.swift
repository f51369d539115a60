import EnrichmentCore
import Foundation
import Hummingbird

/// `POST /v1/enrich`: the extension flow for one payload and device.
struct EnrichRoutes {
    let state: ServiceState

    func register(on router: Router<ServiceContext>) {
        router.post("/v1/enrich") { request, _ in
            let document = try await JSONIO.readJSON(request, limit: state.configuration.maxBodyBytes)
            let input = try EnrichRequest(document)
            let started = ContinuousClock.now
            let result = try await state.enricher.enrich(deviceId: input.deviceId, payload: input.payload,
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
            throw APIError.invalid("invalid_request", "body must be a JSON object {\"device_id\", \"payload\", \"at\"?}")
        }
        guard let idValue = fields["device_id"] else { throw APIError.invalid("invalid_request", "device_id is required") }
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
        case .int(let seconds)?: at = Date(timeIntervalSince1970: Double(seconds))
        case .double(let seconds)? where seconds.isFinite: at = Date(timeIntervalSince1970: seconds)
        case let other?:
            throw APIError.invalid("invalid_request", "at must be epoch seconds (a number), found \(other.typeName)")
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
}
