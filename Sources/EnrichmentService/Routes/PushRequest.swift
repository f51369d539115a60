import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// The body of `POST /v1/push`, validated field by field.
struct PushRequest {
    static let maximumDevices = 1_000

    var push: PushDefinition
    var wait: Bool
    /// `"wait"` as the request gave it.
    var explicitWait: Bool?
    /// The audience the devices come from (instead of `device_ids`), resolved by the route.
    var audience: JSONValue?
    /// `"open": true`: the push's devices are given by further requests (`POST /v1/push/{id}/devices`) until it
    /// is closed; `device_ids` (optional) are its first.
    var open = false

    static let members =
        [
            "device_ids", "payload", "push_type", "priority", "expiration", "collapse_id", "topic", "enrich", "mode",
            "wait", "audience", "missing_time_zone", "cap", "callback_url", "rate", "open",
        ] + timedMembers
    /// The members that make a push timed: its "{{now}}" is filled in as each copy is sent.
    static let timedMembers = ["send_at", "local_time", "quiet_hours"]

    /// `send_at`, `local_time`, `quiet_hours`, `missing_time_zone` and `cap`, as given (nil: none given).
    var timing: SendTiming?
    /// `"cap": null`: this push is not capped, whatever the app's default.
    var uncapped = false
    /// True when the request said `missing_time_zone`.
    var givesMissingZone = false

    /// Reads the timing members; `now` bounds `send_at`.
    mutating func readTiming(_ body: BodyMembers, now: Double) throws {
        var timing = SendTiming()
        var given = false
        if let sendAt = try body.number("send_at") {
            guard sendAt >= now - 300, sendAt <= now + Self.maximumScheduleAhead else {
                throw body.invalid(
                    "send_at",
                    "must be epoch seconds from 5 minutes ago to \(Int(Self.maximumScheduleAhead / 86_400)) days ahead")
            }
            if let expiration = push.expiration, expiration.epochSeconds > 0, Double(expiration.epochSeconds) < sendAt {
                throw body.invalid(
                    "send_at", "is after the push's expiration (\(expiration.epochSeconds)): it would expire unsent")
            }
            timing.sendAt = sendAt
            given = true
        }
        if let text = try body.string("local_time") {
            guard let time = LocalTime(parsing: text) else {
                throw body.invalid("local_time", "must be HH:MM, 24 h, in each device's own zone (e.g. \"09:30\")")
            }
            timing.localTime = time
            given = true
        }
        if let quiet = try body.object(
            "quiet_hours", allowed: ["window", "action"],
            shape: #"{"window": "22:00-08:00", "action": "hold"|"drop"}"#)
        {
            let action = try quiet.choice("action", QuietHours.Action.self) ?? .hold
            guard let window = try quiet.string("window"), let hours = QuietHours(window: window, action: action) else {
                throw APIError.invalid(
                    .invalidRequest,
                    "quiet_hours.window must be HH:MM-HH:MM in each device's own zone (e.g. \"22:00-08:00\"), "
                        + "its start and end different", field: "quiet_hours")
            }
            timing.quietHours = hours
            given = true
        }
        if let missing = try body.choice("missing_time_zone", SendTiming.MissingZone.self) {
            timing.missingZone = missing
            givesMissingZone = true
            given = true
        }
        if body.contains("cap"), body.value("cap") == nil {
            uncapped = true
        } else if let cap = try body.object(
            "cap", allowed: ["max", "window_s"], shape: #"{"max": 3, "window_s": 86400}"#)
        {
            guard let max = try cap.integer("max"), (1...1_000).contains(max),
                let window = try cap.number("window_s", in: 60...31_536_000)
            else {
                throw APIError.invalid(
                    .invalidRequest, "cap must be {\"max\": 1 to 1000, \"window_s\": 60 to 31536000}", field: "cap")
            }
            timing.cap = FrequencyCap(max: Int(max), window: window)
            given = true
        }
        self.timing = given ? timing : nil
    }

    /// Deliveries per second a paced push may ask for (`rate`).
    static let rates = 0.01...1_000_000.0

    /// The furthest ahead a push can be scheduled.
    static let maximumScheduleAhead = 30.0 * 86_400

    init(_ document: JSONValue, now: Double, apps: AppsConfiguration?, callbackHosts: [String] = []) throws {
        let body = try BodyMembers(
            document, allowed: Self.members, shape: "{\"device_ids\": [...], \"payload\": {...}, ...}")
        audience = body.value("audience")
        if body.contains("audience"), audience == nil || audience == .null {
            throw body.invalid("audience", "must be an audience object, e.g. {\"near\": {...}} (docs/AUDIENCES.md)")
        }
        if audience != nil, body.contains("device_ids") {
            throw APIError.invalid(
                .invalidRequest, "give device_ids or audience, not both", field: "audience")
        }
        open = try body.bool("open") ?? false
        if open, audience != nil {
            throw APIError.invalid(
                .invalidRequest,
                "an open push is given its devices by id (POST /v1/push/{id}/devices); an audience push finds its own: "
                    + "give open or audience, not both", field: "open")
        }
        let deviceIds =
            audience != nil || (open && body.value("device_ids") == nil)
            ? [] : try Self.deviceIds(body.value("device_ids"), allowsNone: open)
        let payload: NotificationPayload
        do {
            payload = try NotificationPayload(json: try body.required("payload", "the APNs payload, a JSON object"))
        } catch let error as PayloadError {
            throw APIError.invalid(.invalidPayload, error.description, field: "payload")
        }
        let pushType = try body.choice("push_type", PushType.self) ?? .alert
        var priority: APNsPriority?
        if let raw = try body.integer("priority") {
            guard let known = APNsPriority(rawValue: Int(clamping: raw)) else {
                throw body.invalid(
                    "priority", "must be \(APNsPriority.allowedValues) (Apple's apns-priority values), got \(raw)")
            }
            priority = known
        }
        if priority == nil { priority = pushType.requiredPriority }
        var expiration: APNsExpiration?
        if let raw = try body.integer("expiration") {
            guard let known = APNsExpiration(epochSeconds: raw) else {
                throw body.invalid("expiration", "must be epoch seconds >= 0 (0: deliver once, do not store)")
            }
            expiration = known
        }
        let collapseId = try body.string("collapse_id")
        let topic = try body.string("topic")
        if let topic, let problem = APNsValidator.topicProblem(topic) { throw body.invalid("topic", problem) }
        if let topic { try AppScope.current.requireOwnTopic(topic, field: "topic", apps: apps) }
        if let collapseId, let problem = APNsValidator.collapseIDProblem(collapseId) {
            throw body.invalid("collapse_id", problem)
        }
        let enrich = try body.bool("enrich") ?? true
        let mode = try body.choice("mode", BodyMode.self)
        explicitWait = try body.bool("wait")
        wait = explicitWait ?? (deviceIds.count <= PushRoutes.waitDefaultLimit)

        if enrich, payload.encodedSize > NotificationPayload.maximumSize {
            throw APIError(
                .contentTooLarge, reason: .invalidPush,
                message:
                    "the payload is \(payload.encodedSize) bytes; an enriched push may have at most \(NotificationPayload.maximumSize) (send larger voip payloads with \"enrich\": false)",
                details: ["field": .string("payload")])
        }
        // The payload and headers every delivery shares are checked once, as APNs would (a well-formed probe
        // token; the registration's topic is not known yet). A push with timing has its "{{now}}" filled in when
        // sent: it is measured filled in.
        let timed = Self.timedMembers.contains { body.value($0) != nil }
        let bytes = (timed ? PayloadStamp.stamp(payload.json, now: Int64(now)) : payload.json).encodedData()
        let probe = APNsRequest(
            deviceToken: String(repeating: "0", count: 64),
            topic: pushType.topic(forBundle: topic ?? "com.example.app"),
            pushType: pushType, priority: priority, expiration: expiration,
            collapseID: collapseId, payload: Array(bytes))
        if let violation = APNsValidator.headerViolation(of: probe) ?? APNsValidator.violation(of: probe) {
            let field: String =
                switch violation.reason {
                case .badTopic, .missingTopic: "topic"
                case .badPriority: "priority"
                case .badCollapseId: "collapse_id"
                case .badExpirationDate: "expiration"
                case .invalidPushType: "push_type"
                default: "payload"
                }
            let status: HTTPResponse.Status = violation.reason == .payloadTooLarge ? .contentTooLarge : .badRequest
            throw APIError(
                status, reason: .invalidPush, message: "\(violation.reason.rawValue): \(violation.message)",
                details: ["field": .string(field)])
        }
        push = PushDefinition(
            id: RandomUUID.lowercased(), createdAt: now, payload: payload.json, pushType: pushType,
            priority: priority, expiration: expiration, collapseId: collapseId, topic: topic, enrich: enrich,
            mode: mode, deviceIds: deviceIds,
            callbackURL: try Self.callbackURL(body.string("callback_url"), hosts: callbackHosts),
            rate: try body.number("rate", in: Self.rates))
        try readTiming(body, now: now)
    }

    /// A push's `callback_url`: http(s), no credentials in it, on a host the operator allows.
    static func callbackURL(_ text: String?, hosts: [String]) throws -> String? {
        guard let text else { return nil }
        let field = "callback_url"
        if let problem = OutboundURL.problem(text) {
            throw APIError.invalid(
                .invalidRequest,
                "callback_url is refused: \(problem). It must be \(OutboundURL.allowed), e.g. "
                    + "https://hooks.example.com/push-final",
                field: field)
        }
        guard let host = URL(string: text)?.host?.lowercased() else {
            throw APIError.invalid(.invalidRequest, "callback_url has no host", field: field)
        }
        guard !hosts.isEmpty else {
            throw APIError.invalid(
                .invalidRequest,
                "callback_url is off on this service: its operator names the hosts pushes may call back in "
                    + "ENRICH_PUSH_CALLBACK_HOSTS", field: field)
        }
        guard PushCallbacks.isAllowed(host: host, hosts: hosts) else {
            throw APIError.invalid(
                .invalidRequest,
                "callback_url's host '\(host)' is not one this service may call (ENRICH_PUSH_CALLBACK_HOSTS names "
                    + "them)", field: field)
        }
        return text
    }

    static func deviceIds(_ value: JSONValue?, allowsNone: Bool = false) throws -> [String] {
        guard let value else {
            throw APIError.invalid(
                .invalidRequest,
                "device_ids (1 to \(maximumDevices) device ids) or audience (docs/AUDIENCES.md) is required")
        }
        guard case .array(let items) = value else {
            throw APIError.invalid(
                .invalidRequest, "device_ids must be an array of strings, found \(value.typeName)",
                field: "device_ids")
        }
        guard ((allowsNone ? 0 : 1)...maximumDevices).contains(items.count) else {
            throw APIError.invalid(
                .invalidRequest,
                "device_ids has \(items.count) ids; \(allowsNone ? 0 : 1) to \(maximumDevices) are accepted per "
                    + "request (a longer list: an open push, \"open\": true, then POST /v1/push/{id}/devices "
                    + "\(maximumDevices) at a time; push-sender push --devices-file does it)",
                field: "device_ids")
        }
        var seen = Set<String>()
        return try items.enumerated().map { index, item in
            guard let id = item.stringValue else {
                throw APIError.invalid(
                    .invalidRequest, "device_ids[\(index)] must be a string, found \(item.typeName)",
                    field: "device_ids")
            }
            if let problem = DeviceID.problem(with: id) {
                throw APIError.invalid(.invalidDeviceID, "device_ids[\(index)]: \(problem)", field: "device_ids")
            }
            guard seen.insert(id).inserted else {
                throw APIError.invalid(
                    .invalidRequest, "device_ids[\(index)] '\(id)' is listed twice; name each device once",
                    field: "device_ids")
            }
            return AppScope.current.key(id)
        }
    }
}
