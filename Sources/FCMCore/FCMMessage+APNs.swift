public import Essentials

/// How an APNs push's headers carry over to FCM.
public struct FCMDeliveryOptions: Sendable, Equatable {
    /// A data-only message (no `notification`: the app builds what it shows, and is woken to do it).
    public var dataOnly: Bool
    /// `apns-priority` (10, 5 or 1): 10 is `HIGH`, 5 and 1 are `NORMAL`; nil leaves FCM's default.
    public var apnsPriority: Int?
    /// `apns-expiration` (epoch seconds; 0: now or never); nil leaves FCM's default of four weeks.
    public var apnsExpiration: Int64?
    /// `apns-collapse-id`: becomes `android.collapse_key`.
    public var collapseID: String?
    /// The image Android shows expanded (the enrichment's static map).
    public var image: String?

    public init(
        dataOnly: Bool = false, apnsPriority: Int? = nil, apnsExpiration: Int64? = nil, collapseID: String? = nil,
        image: String? = nil
    ) {
        self.dataOnly = dataOnly
        self.apnsPriority = apnsPriority
        self.apnsExpiration = apnsExpiration
        self.collapseID = collapseID
        self.image = image
    }
}

/// A payload FCM would refuse, said before anything is sent: the member, why, what is allowed.
public struct FCMMessageProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public var field: String
    public var message: String
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }
    public var description: String { "\(field): \(message)" }
}

extension FCMMessage {
    /// Keys FCM refuses in `data`, as the v1 reference of `Message.data` lists them: "from", "message_type", and
    /// any key starting with "google." or "gcm.notification." (case-sensitive; `googleMapsUrl` is an ordinary key).
    public static func isReservedDataKey(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key.hasPrefix("google.") || key.hasPrefix("gcm.notification.")
    }

    /// The Android twin of an APNs payload: `aps.alert`'s title and body become `notification` (its subtitle, which
    /// Android has no place for, goes to `data.subtitle`); localized keys and arguments, `sound`, `badge` and
    /// `category` become `android.notification`'s `title_loc_key`, `title_loc_args`, `body_loc_key`,
    /// `body_loc_args`, `sound`, `notification_count` and `click_action` (FCM's own mapping for iOS); every other
    /// top-level key becomes a `data` entry, a string as it is and any other value as its compact JSON. A
    /// data-only message (asked for, or a payload with no alert) carries title, subtitle and body in `data`.
    /// `now` (epoch seconds) turns an expiration into a time to live.
    public static func fromAPNs(
        payload: JSONValue, token: String, options: FCMDeliveryOptions = FCMDeliveryOptions(), now: Int64
    ) throws(FCMMessageProblem) -> FCMMessage {
        guard case .object(let members) = payload else {
            throw FCMMessageProblem(field: "payload", message: "must be a JSON object (an APNs payload)")
        }
        var message = FCMMessage(token: token)
        let aps = members["aps"]?.objectValue ?? [:]
        var title: String?
        var subtitle: String?
        var body: String?
        var extras: [String: JSONValue] = [:]
        switch aps["alert"] {
        case .string(let text)?: body = text
        case .object(let alert)?:
            title = alert["title"]?.stringValue
            subtitle = alert["subtitle"]?.stringValue
            body = alert["body"]?.stringValue
            if let key = alert["title-loc-key"]?.stringValue { extras["title_loc_key"] = .string(key) }
            if let key = alert["loc-key"]?.stringValue { extras["body_loc_key"] = .string(key) }
            if let arguments = alert["title-loc-args"] {
                extras["title_loc_args"] = try Self.strings(arguments, "aps.alert.title-loc-args")
            }
            if let arguments = alert["loc-args"] {
                extras["body_loc_args"] = try Self.strings(arguments, "aps.alert.loc-args")
            }
        default: break
        }
        let hasAlert = title != nil || body != nil || extras["body_loc_key"] != nil || extras["title_loc_key"] != nil
        for (key, value) in members where key != "aps" {
            guard !isReservedDataKey(key) else {
                throw FCMMessageProblem(
                    field: key,
                    message: "FCM refuses this data key (reserved: from, message_type, and keys starting with "
                        + "google. or gcm.notification.); rename it")
            }
            message.data[key] = value.stringValue ?? String(decoding: JSONWriter.bytes(value), as: UTF8.self)
        }
        if options.dataOnly || !hasAlert {
            if let title { message.data["title"] = title }
            if let subtitle { message.data["subtitle"] = subtitle }
            if let body { message.data["body"] = body }
            if let image = options.image { message.data["image"] = image }
        } else {
            message.notification = Notification(title: title, body: body, image: options.image)
            if let subtitle { message.data["subtitle"] = subtitle }
            switch aps["sound"] {
            case .string(let name)?: extras["sound"] = .string(name)
            case .object(let sound)?: if let name = sound["name"]?.stringValue { extras["sound"] = .string(name) }
            default: break
            }
            if case .int(let badge)? = aps["badge"] { extras["notification_count"] = .int(badge) }
            if let category = aps["category"]?.stringValue { extras["click_action"] = .string(category) }
            message.android.notification = extras
        }
        switch options.apnsPriority {
        case 10?: message.android.priority = .high
        case nil: break
        default: message.android.priority = .normal
        }
        if let expiration = options.apnsExpiration {
            message.android.ttlSeconds = expiration == 0 ? 0 : min(max(0, expiration - now), maximumTTLSeconds)
        }
        message.android.collapseKey = options.collapseID
        let size = message.payloadSize
        if size > maximumPayloadSize {
            throw FCMMessageProblem(
                field: "payload",
                message: "the Android message would be \(size) bytes; FCM takes at most \(maximumPayloadSize) "
                    + "(notification, data and android.notification): shorten the body or the custom keys")
        }
        return message
    }

    private static func strings(_ value: JSONValue, _ field: String) throws(FCMMessageProblem) -> JSONValue {
        guard case .array(let items) = value else {
            throw FCMMessageProblem(field: field, message: "must be an array of strings")
        }
        var strings: [JSONValue] = []
        for item in items {
            switch item {
            case .string: strings.append(item)
            case .int(let number): strings.append(.string(String(number)))
            default: throw FCMMessageProblem(field: field, message: "must be an array of strings")
            }
        }
        return .array(strings)
    }
}
