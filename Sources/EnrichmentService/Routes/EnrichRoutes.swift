import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// `POST /v1/enrich`: the extension flow for one payload and device.
struct EnrichRoutes {
    let state: ServiceState

    func register(on router: RouteRecorder) {
        router.post("/v1/enrich", permission: Self.permission) { request, _ in
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            let input = try EnrichRequest(document)
            let started = ContinuousClock.now
            let result = try await state.enricher(forDevice: input.deviceId).enrich(
                deviceId: input.deviceId, payload: input.payload, at: input.at, mode: input.mode,
                staleness: input.policy(state.enricher.settings.staleness), fix: input.givenFix(clock: state.clock))
            return answer(result, started: started)
        }
    }

    /// Who may enrich: keys that read and keys that send (it changes nothing).
    static let permission = AppScope.Permission.readOrSend

    /// The enrichment's metrics recorded, and its answer.
    func answer(_ result: EnrichmentResult, started: ContinuousClock.Instant) -> Response {
        state.metrics.enrichment(result, started: started)
        return JSONIO.response(bytes: result.encodedJSON())
    }
}

extension EnrichRequest {
    /// This request's staleness rules over the service's `rules`; nil when it sets none.
    func policy(_ rules: StalenessPolicy) -> StalenessPolicy? {
        window == nil && maxFutureSkew == nil
            ? nil
            : StalenessPolicy(
                window: window ?? rules.window, maxFutureSkew: maxFutureSkew.map { $0 } ?? rules.maxFutureSkew)
    }

    /// The fix given for this evaluation only, as the enricher takes it.
    func givenFix(clock: any WallClock) -> LocationFix? {
        fix.map { fix in
            LocationFix(
                deviceId: deviceId, coordinate: fix.coordinate,
                fixTime: fix.time ?? (at ?? clock.now()).timeIntervalSince1970,
                horizontalAccuracy: fix.accuracy, context: "request", receivedAt: clock.now().timeIntervalSince1970)
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
        let body = try BodyMembers(document, allowed: Self.members, shape: "{\"device_id\", \"payload\", \"at\"?}")
        window = try Self.seconds(body, "window")
        if let fix = try body.object(
            "fix", allowed: ["latitude", "longitude", "horizontal_accuracy", "utc_timestamp"],
            shape: "{\"latitude\", \"longitude\", \"horizontal_accuracy\"?}")
        {
            self.fix = try Self.fix(fix)
        }
        if body.contains("max_future_skew") {
            maxFutureSkew = .some(try Self.seconds(body, "max_future_skew"))
        }
        let id = try body.requiredString("device_id")
        if let problem = DeviceID.problem(with: id) {
            throw APIError.invalid(.invalidDeviceID, problem, field: "device_id")
        }
        deviceId = AppScope.current.key(id)
        do {
            payload = try NotificationPayload(json: try body.required("payload", "the APNs payload, a JSON object"))
        } catch let error as PayloadError {
            throw APIError.invalid(.invalidPayload, error.description, field: "payload")
        }
        if let value = body.value("at") {
            guard value.stringValue == nil, let seconds = value.lenientDouble else {
                throw body.invalid("at", "must be epoch seconds (a number), found \(value.typeName)")
            }
            at = try Self.instant(seconds, raw: String(decoding: value.encodedData(), as: UTF8.self))
        }
        mode = try body.choice("mode", BodyMode.self)
    }

    /// The request's own fix, checked member by member.
    static func fix(_ members: BodyMembers) throws -> (coordinate: Coordinate, accuracy: Double?, time: Double?) {
        guard let latitude = try members.number("latitude", in: -90...90),
            let longitude = try members.number("longitude", in: -180...180)
        else {
            throw APIError.invalid(.invalidRequest, "fix needs latitude and longitude", field: "fix")
        }
        let accuracy = try members.number("horizontal_accuracy", in: 0...1_000_000)
        let time = try members.number("utc_timestamp", in: StalenessPolicy.evaluableSeconds)
        return (Coordinate(latitude: latitude, longitude: longitude), accuracy, time)
    }

    /// A whole number of seconds from 0 to ten years, or nil when absent.
    static func seconds(_ body: BodyMembers, _ name: String) throws -> Int64? {
        let limit: Int64 = 315_360_000
        guard let value = body.value(name) else { return nil }
        guard case .int(let seconds) = value, (0...limit).contains(seconds) else {
            throw body.invalid(name, "must be whole seconds from 0 to \(limit) (ten years)")
        }
        return seconds
    }

    /// `at` as an instant, refused outside the range a verdict can be given for.
    static func instant(_ seconds: Double, raw: String) throws -> Date {
        let range = StalenessPolicy.evaluableSeconds
        // Judged on whole seconds, as the staleness rule is: any instant within the last second is accepted.
        guard range.contains(seconds.rounded(.down)) else {
            throw APIError.invalid(
                .invalidRequest,
                "at \(raw) is outside the accepted range: epoch seconds from \(Int64(range.lowerBound)) (1970-01-01T00:00:00Z) to \(Int64(range.upperBound)) (9999-12-31T23:59:59Z)",
                field: "at")
        }
        return Date(timeIntervalSince1970: seconds)
    }
}
