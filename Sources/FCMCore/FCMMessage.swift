public import Essentials

/// One FCM HTTP v1 message to one registration token, as `POST /v1/projects/{project}/messages:send` takes it:
/// `{"message": {"token", "notification"?, "data"?, "android"?}}`. Written with sorted keys, so the bytes of a
/// message are a function of its fields (tests compare them byte for byte).
public struct FCMMessage: Sendable, Equatable {
    /// The device's FCM registration token.
    public var token: String
    /// What Android shows (absent for a data-only message).
    public var notification: Notification?
    /// The app's key-value pairs; FCM takes string values only.
    public var data: [String: String]
    /// Android delivery options.
    public var android: AndroidConfig

    public init(
        token: String, notification: Notification? = nil, data: [String: String] = [:],
        android: AndroidConfig = AndroidConfig()
    ) {
        self.token = token
        self.notification = notification
        self.data = data
        self.android = android
    }

    /// `message.notification`: the fields every platform shares.
    public struct Notification: Sendable, Equatable {
        public var title: String?
        public var body: String?
        /// An image URL Android shows expanded (the static map).
        public var image: String?

        public init(title: String? = nil, body: String? = nil, image: String? = nil) {
            self.title = title
            self.body = body
            self.image = image
        }
    }

    /// `message.android`.
    public struct AndroidConfig: Sendable, Equatable {
        /// `HIGH` or `NORMAL`; nil leaves FCM's default (HIGH for notification messages, NORMAL for data).
        public var priority: Priority?
        /// Seconds FCM keeps the message for an offline device (`"3600s"`); 0: now or never. Nil: FCM's 4 weeks.
        public var ttlSeconds: Int64?
        /// Messages with the same key replace each other while waiting (APNs' collapse id).
        public var collapseKey: String?
        /// `message.android.notification`: what only Android has.
        public var notification: [String: JSONValue]

        public init(
            priority: Priority? = nil, ttlSeconds: Int64? = nil, collapseKey: String? = nil,
            notification: [String: JSONValue] = [:]
        ) {
            self.priority = priority
            self.ttlSeconds = ttlSeconds
            self.collapseKey = collapseKey
            self.notification = notification
        }
    }

    /// FCM's two Android priorities.
    public enum Priority: String, Sendable, Equatable {
        case high = "HIGH"
        case normal = "NORMAL"
    }

    /// FCM's limit on a message's payload.
    public static let maximumPayloadSize = 4096
    /// FCM keeps a message at most four weeks.
    public static let maximumTTLSeconds: Int64 = 28 * 24 * 3600

    /// `message` as JSON (without the token when `includingToken` is false).
    public func messageJSON(includingToken: Bool = true) -> JSONValue {
        var message: [String: JSONValue] = [:]
        if includingToken { message["token"] = .string(token) }
        if let notification {
            var members: [String: JSONValue] = [:]
            if let title = notification.title { members["title"] = .string(title) }
            if let body = notification.body { members["body"] = .string(body) }
            if let image = notification.image { members["image"] = .string(image) }
            message["notification"] = .object(members)
        }
        if !data.isEmpty { message["data"] = .object(data.mapValues(JSONValue.string)) }
        var android: [String: JSONValue] = [:]
        if let priority = self.android.priority { android["priority"] = .string(priority.rawValue) }
        if let ttl = self.android.ttlSeconds { android["ttl"] = .string("\(ttl)s") }
        if let key = self.android.collapseKey { android["collapse_key"] = .string(key) }
        if !self.android.notification.isEmpty { android["notification"] = .object(self.android.notification) }
        if !android.isEmpty { message["android"] = .object(android) }
        return .object(message)
    }

    /// The request body: `{"message": {...}}`, with `"validate_only": true` for a dry run FCM checks but does not
    /// deliver.
    public func requestBody(validateOnly: Bool = false) -> [UInt8] {
        var body: [String: JSONValue] = ["message": messageJSON()]
        if validateOnly { body["validate_only"] = .bool(true) }
        return JSONWriter.bytes(.object(body))
    }

    /// The bytes counted against FCM's 4,096: what the device receives (`notification`, `data`, `android.data` and
    /// `android.notification` as JSON), not the token or delivery options. Google says only "4096 bytes"; this
    /// counts everything the device gets, so it is never looser. The mock counts the same way.
    public var payloadSize: Int { Self.payloadSize(of: messageJSON(includingToken: false)) }

    /// The payload size of a `message` object as received (see `payloadSize`).
    public static func payloadSize(of message: JSONValue) -> Int {
        var counted: [String: JSONValue] = [:]
        if let notification = message["notification"] { counted["notification"] = notification }
        if let data = message["data"] { counted["data"] = data }
        if let notification = message["android"]?["notification"] { counted["android_notification"] = notification }
        if let data = message["android"]?["data"] { counted["android_data"] = data }
        return counted.isEmpty ? 0 : JSONWriter.encodedLength(.object(counted))
    }
}
