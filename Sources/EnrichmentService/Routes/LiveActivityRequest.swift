import APNsCore
import Essentials
import Foundation

/// The body of a Live Activity start, update or end, validated field by field.
struct LiveActivityRequest {
    var contentState: JSONValue
    var attributes: JSONValue?
    var alert: JSONValue?
    var sound: JSONValue?
    var staleDate: Int64?
    var dismissalDate: Int64?
    var relevanceScore: Double?
    var inputPushToken: Bool
    var inputPushChannel: String?
    var timestamp: Int64?
    var priority: APNsPriority
    var expiration: APNsExpiration?
    var enrich: Bool
    var attributesType: String?

    static func members(_ event: LiveActivityEvent) -> [String] {
        var members = [
            "content_state", "alert", "sound", "stale_date", "relevance_score", "timestamp", "priority", "expiration",
            "enrich",
        ]
        switch event {
        case .start: members += ["attributes", "input_push_token", "input_push_channel"]
        case .update: break
        case .end: members.append("dismissal_date")
        }
        return members
    }

    init(_ document: JSONValue, event: LiveActivityEvent) throws {
        let body = try BodyMembers(
            document, allowed: Self.members(event),
            shape: "{\"content_state\": {...}, \"priority\"?: 5|10, ...}")
        let contentState = try body.required("content_state", "the activity's ContentState as JSON")
        guard case .object = contentState else {
            throw body.invalid("content_state", "must be an object (the activity's ContentState)")
        }
        self.contentState = contentState
        alert = body.value("alert")
        if let alert {
            switch alert {
            case .string, .object: break
            default: throw body.invalid("alert", "must be a string or an object (title, body, sound)")
            }
        }
        sound = body.value("sound")
        if let sound {
            switch sound {
            case .string, .object: break
            default: throw body.invalid("sound", "must be a sound file name or an object (critical, name, volume)")
            }
        }
        if event == .start {
            guard let attributes = body.value("attributes"), case .object = attributes else {
                throw body.invalid("attributes", "is required for a start: the activity's attributes object")
            }
            self.attributes = attributes
            guard alert != nil else {
                throw body.invalid(
                    "alert", "is required for a start: Apple asks that the person be told an activity started")
            }
            inputPushToken = try body.bool("input_push_token") ?? false
            inputPushChannel = try body.string("input_push_channel")
            if inputPushToken, inputPushChannel != nil {
                throw body.invalid(
                    "input_push_channel", "and input_push_token exclude each other: updates come by token or channel")
            }
        } else {
            inputPushToken = false
        }
        func epochSeconds(_ name: String) throws -> Int64? {
            guard let value = try body.integer(name) else { return nil }
            guard value >= 0, value <= 253_402_300_799 else { throw body.invalid(name, "must be epoch seconds") }
            return value
        }
        staleDate = try epochSeconds("stale_date")
        dismissalDate = try epochSeconds("dismissal_date")
        relevanceScore = try body.number("relevance_score")
        if let value = try body.integer("timestamp") {
            guard value >= 0, value <= 99_999_999_999 else {
                throw body.invalid("timestamp", "must be epoch seconds (not milliseconds)")
            }
            timestamp = value
        }
        let rawPriority = try body.integer("priority") ?? 10
        guard rawPriority == 10 || rawPriority == 5 else {
            throw body.invalid(
                "priority",
                "must be 10 (now; counts against the hourly budget) or 5 (as power allows); Live Activities take no 1")
        }
        priority = rawPriority == 10 ? .immediately : .considerate
        if let raw = try body.integer("expiration") {
            guard let known = APNsExpiration(epochSeconds: raw) else {
                throw body.invalid("expiration", "must be epoch seconds >= 0 (0: deliver once, do not store)")
            }
            expiration = known
        }
        enrich = try body.bool("enrich") ?? false
    }

    /// The payload as APNs gets it.
    func payload(event: LiveActivityEvent, timestamp: Int64, contentState: JSONValue) -> JSONValue {
        var aps: [String: JSONValue] = [
            "timestamp": .int(timestamp), "event": .string(event.rawValue), "content-state": contentState,
        ]
        if let alert { aps["alert"] = alert }
        if let sound { aps["sound"] = sound }
        if let staleDate { aps["stale-date"] = .int(staleDate) }
        if let dismissalDate { aps["dismissal-date"] = .int(dismissalDate) }
        if let relevanceScore {
            aps["relevance-score"] =
                relevanceScore == relevanceScore.rounded() && abs(relevanceScore) < 1e15
                ? .int(Int64(relevanceScore)) : .double(relevanceScore)
        }
        if let attributes {
            aps["attributes"] = attributes
            aps["attributes-type"] = .string(attributesType ?? "")
        }
        if inputPushToken { aps["input-push-token"] = .int(1) }
        if let inputPushChannel { aps["input-push-channel"] = .string(inputPushChannel) }
        return .object(["aps": .object(aps)])
    }

    /// True when the dismissal date is past the four hours Apple keeps an ended activity.
    func dismissalCapped(timestamp: Int64) -> Bool {
        guard let dismissalDate else { return false }
        return dismissalDate - timestamp > LiveActivityPayload.maximumDismissalDelay
    }
}
