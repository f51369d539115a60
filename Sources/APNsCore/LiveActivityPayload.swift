public import Essentials

/// What a Live Activity push does (`aps.event`).
public enum LiveActivityEvent: String, Sendable, CaseIterable {
    case start, update, end
}

/// Apple's rules for a Live Activity payload ("Starting and updating Live Activities with ActivityKit push
/// notifications"; the `aps` keys of "Generating a remote notification"), written once for the sender, the
/// broadcast command and the service.
public enum LiveActivityPayload {
    /// A payload that breaks a rule: the field (a JSON path) and why.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var field: String
        public var message: String

        public init(field: String, message: String) {
            self.field = field
            self.message = message
        }

        public var description: String { "\(field): \(message)" }
    }

    /// Apple keeps an ended activity on the Lock Screen for at most four hours; a later `dismissal-date` is
    /// honoured only up to then.
    public static let maximumDismissalDelay: Int64 = 4 * 3600

    /// Epoch seconds past this are taken for milliseconds (the year 5138).
    static let largestSeconds: Int64 = 99_999_999_999

    /// The keys a Live Activity `aps` may carry.
    static let keys: Set<String> = [
        "timestamp", "event", "content-state", "stale-date", "dismissal-date", "relevance-score", "alert", "sound",
        "attributes-type", "attributes", "input-push-token", "input-push-channel",
    ]

    /// Checks a whole payload (`{"aps": {...}, ...}`) and answers its event.
    ///
    /// - `aps.timestamp` (epoch seconds) is required: Apple's every example has it, the phone shows the newest
    ///   update by it, and the staleness rule reads it.
    /// - `aps.event` is `start`, `update` or `end`; `content-state` is an object (the activity's
    ///   `ContentState`, which the phone decodes with the default JSON strategies).
    /// - A start carries an `alert`, `attributes-type` and `attributes`, and may ask for a token
    ///   (`input-push-token: 1`) or listen on a channel (`input-push-channel`), not both (iOS 18).
    /// - `stale-date` and `dismissal-date` are epoch seconds; `dismissal-date` only on `end`.
    /// - `relevance-score` is any number: for Live Activities a relative value, not 0 to 1.
    public static func check(_ document: JSONValue) throws(Problem) -> LiveActivityEvent {
        guard case .object(let root) = document else {
            throw Problem(field: "payload", message: "must be a JSON object")
        }
        guard case .object(let aps)? = root["aps"] else {
            throw Problem(field: "aps", message: "a Live Activity payload needs an \"aps\" object")
        }
        if let unknown = aps.keys.sorted().first(where: { !keys.contains($0) }) {
            throw Problem(
                field: "aps.\(unknown)",
                message: "is not a Live Activity key (allowed: \(keys.sorted().joined(separator: ", ")))")
        }
        guard let timestamp = aps["timestamp"] else {
            throw Problem(
                field: "aps.timestamp",
                message: "is required: the time of this update in epoch seconds (the phone keeps the newest)")
        }
        _ = try seconds(timestamp, field: "aps.timestamp")
        guard let eventText = aps["event"]?.stringValue, let event = LiveActivityEvent(rawValue: eventText) else {
            throw Problem(field: "aps.event", message: "must be \"start\", \"update\" or \"end\"")
        }
        guard case .object? = aps["content-state"] else {
            throw Problem(
                field: "aps.content-state",
                message: "must be an object: the activity's ContentState (its initial, updated or final content)")
        }
        for key in ["stale-date", "dismissal-date"] {
            if let value = aps[key] { _ = try seconds(value, field: "aps.\(key)") }
        }
        if let score = aps["relevance-score"] {
            switch score {
            case .int, .double: break
            default:
                throw Problem(
                    field: "aps.relevance-score",
                    message: "must be a number (for Live Activities any relative value, e.g. 25, 50, 100)")
            }
        }
        if aps["dismissal-date"] != nil, event != .end {
            throw Problem(
                field: "aps.dismissal-date", message: "applies when an activity ends: send it with \"event\": \"end\"")
        }
        if event == .start {
            guard let alert = aps["alert"], alert != .null else {
                throw Problem(
                    field: "aps.alert", message: "a start must carry an alert, so that the person is told (Apple)")
            }
            guard let type = aps["attributes-type"]?.stringValue, !type.isEmpty else {
                throw Problem(
                    field: "aps.attributes-type",
                    message: "a start names its ActivityAttributes type, e.g. \"DeliveryAttributes\"")
            }
            guard case .object? = aps["attributes"] else {
                throw Problem(field: "aps.attributes", message: "a start carries the activity's attributes object")
            }
            if let input = aps["input-push-token"], input != .int(1) {
                throw Problem(field: "aps.input-push-token", message: "must be 1 (iOS 18: the new activity's token)")
            }
            if let channel = aps["input-push-channel"] {
                guard let id = channel.stringValue, !id.isEmpty else {
                    throw Problem(field: "aps.input-push-channel", message: "must be a channel id")
                }
                if aps["input-push-token"] != nil {
                    throw Problem(
                        field: "aps.input-push-channel",
                        message: "an activity gets updates by its token or on a channel: not both")
                }
            }
        } else {
            for key in ["attributes-type", "attributes", "input-push-token", "input-push-channel"]
            where aps[key] != nil {
                throw Problem(field: "aps.\(key)", message: "belongs to a start only (\"event\": \"start\")")
            }
        }
        return event
    }

    /// Why a payload cannot be broadcast on a channel, or nil: the Live Activity rules, and no start (Apple: "You
    /// can't use broadcast push notifications to start a Live Activity").
    public static func broadcastProblem(_ document: JSONValue) -> String? {
        do throws(Problem) {
            if try check(document) == .start {
                return "aps.event: a broadcast cannot start an activity; start it with a push-to-start token and "
                    + "\"input-push-channel\", then broadcast updates"
            }
            return nil
        } catch {
            return error.description
        }
    }

    /// An epoch-seconds field.
    static func seconds(_ value: JSONValue, field: String) throws(Problem) -> Int64 {
        guard case .int(let seconds) = value, seconds >= 0 else {
            throw Problem(field: field, message: "must be whole epoch seconds")
        }
        if seconds > largestSeconds {
            throw Problem(field: field, message: "is epoch seconds, not milliseconds (\(seconds) is in the far future)")
        }
        return seconds
    }
}
