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
            let rules = state.enricher.settings.staleness
            let policy =
                input.window == nil && input.maxFutureSkew == nil
                ? nil
                : StalenessPolicy(
                    window: input.window ?? rules.window,
                    maxFutureSkew: input.maxFutureSkew.map { $0 } ?? rules.maxFutureSkew)
            let result = try await state.enricher.enrich(
                deviceId: input.deviceId, payload: input.payload,
                at: input.at, mode: input.mode, staleness: policy,
                fix: input.fix.map { fix in
                    LocationFix(
                        deviceId: input.deviceId, coordinate: fix.coordinate,
                        fixTime: fix.time ?? (input.at ?? state.clock.now()).timeIntervalSince1970,
                        horizontalAccuracy: fix.accuracy, context: "request",
                        receivedAt: state.clock.now().timeIntervalSince1970)
                })
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
    /// This request's staleness window, seconds (the service's when nil).
    var window: Int64?
    /// This request's future skew limit: nil keeps the service's, `.some(nil)` turns it off (JSON null).
    var maxFutureSkew: Int64??

    /// A fix for this evaluation only: `{"latitude", "longitude", "horizontal_accuracy"?, "utc_timestamp"?}`.
    var fix: (coordinate: Coordinate, accuracy: Double?, time: Double?)?

    static let members = ["device_id", "payload", "at", "mode", "window", "max_future_skew", "fix"]

    init(_ document: JSONValue) throws {
        guard case .object(let fields) = document else {
            throw APIError.invalid(
                "invalid_request", "body must be a JSON object {\"device_id\", \"payload\", \"at\"?}")
        }
        // An unknown member is refused: a misspelt rule silently ignored would judge by the wrong one.
        if let unknown = fields.keys.sorted().first(where: { !Self.members.contains($0) }) {
            throw APIError.invalid(
                "unknown_field",
                "'\(unknown)' is not a member of this request; allowed: \(Self.members.joined(separator: ", "))",
                field: unknown)
        }
        window = try Self.seconds(fields["window"], name: "window")
        if let raw = fields["fix"], raw != .null { fix = try Self.fix(raw) }
        if let raw = fields["max_future_skew"] {
            maxFutureSkew = raw == .null ? .some(nil) : .some(try Self.seconds(raw, name: "max_future_skew"))
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

    /// The request's own fix, checked member by member.
    static func fix(_ value: JSONValue) throws -> (coordinate: Coordinate, accuracy: Double?, time: Double?) {
        guard case .object(let members) = value else {
            throw APIError.invalid(
                "invalid_request", "fix must be an object {\"latitude\", \"longitude\", \"horizontal_accuracy\"?}",
                field: "fix")
        }
        let allowed = ["latitude", "longitude", "horizontal_accuracy", "utc_timestamp"]
        if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw APIError.invalid(
                "unknown_field", "fix.\(unknown) is not a fix member; allowed: \(allowed.joined(separator: ", "))",
                field: "fix.\(unknown)")
        }
        func number(_ key: String, _ range: ClosedRange<Double>?) throws -> Double? {
            guard let raw = members[key], raw != .null else { return nil }
            guard let value = raw.lenientDouble, raw.stringValue == nil, value.isFinite,
                range.map({ $0.contains(value) }) ?? true
            else {
                let allowedText = range.map { " in [\($0.lowerBound), \($0.upperBound)]" } ?? ""
                throw APIError.invalid(
                    "invalid_request", "fix.\(key) must be a number\(allowedText)", field: "fix.\(key)")
            }
            return value
        }
        guard let latitude = try number("latitude", -90...90), let longitude = try number("longitude", -180...180)
        else {
            throw APIError.invalid("invalid_request", "fix needs latitude and longitude", field: "fix")
        }
        let accuracy = try number("horizontal_accuracy", 0...1_000_000)
        let time = try number("utc_timestamp", StalenessPolicy.evaluableSeconds)
        return (Coordinate(latitude: latitude, longitude: longitude), accuracy, time)
    }

    /// A whole number of seconds from 0 to ten years, or nil when absent.
    static func seconds(_ value: JSONValue?, name: String) throws -> Int64? {
        let limit: Int64 = 315_360_000
        switch value {
        case nil: return nil
        case .int(let seconds)? where (0...limit).contains(seconds): return seconds
        default:
            throw APIError.invalid(
                "invalid_request", "\(name) must be whole seconds from 0 to \(limit) (ten years)", field: name)
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
