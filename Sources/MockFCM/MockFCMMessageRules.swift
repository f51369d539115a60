import Essentials
import FCMCore

/// The checks FCM's send endpoint makes on a request body, with Google's wording: the members the `Message`
/// resource has (an unknown one is refused, as protobuf's JSON mapping does), exactly one target, a well-formed
/// registration token, string data values and no reserved data keys, Android's priority and `ttl` (a duration of
/// at most four weeks), and FCM's 4,096-byte payload (counted as `FCMMessage.payloadSize` counts it).
enum MockFCMMessageRules {
    struct Refusal: Error {
        var message: String
        var field: String?
        var code: FCMErrorCode = .invalidArgument
    }

    static let messageMembers: Set<String> = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "token", "topic", "condition",
    ]
    static let notificationMembers: Set<String> = ["title", "body", "image"]
    static let androidMembers: Set<String> = [
        "collapse_key", "priority", "ttl", "restricted_package_name", "data", "notification", "fcm_options",
        "direct_boot_ok", "bandwidth_constrained_ok", "restricted_satellite_ok",
    ]
    static let androidNotificationMembers: Set<String> = [
        "title", "body", "icon", "color", "sound", "tag", "click_action", "body_loc_key", "body_loc_args",
        "title_loc_key", "title_loc_args", "channel_id", "ticker", "sticky", "event_time", "local_only",
        "notification_priority", "default_sound", "default_vibrate_timings", "default_light_settings",
        "vibrate_timings", "visibility", "notification_count", "light_settings", "image",
        "bypass_proxy_notification", "proxy",
    ]

    /// A resource's members as FCM reads them: protobuf's JSON mapping takes a field by its name or its
    /// lowerCamelCase name (`collapse_key` or `collapseKey`), and `null` as the field left out.
    static func fields(_ members: [String: JSONValue]) -> [String: JSONValue] {
        var fields: [String: JSONValue] = [:]
        for (name, value) in members where value != .null { fields[snakeCase(name)] = value }
        return fields
    }

    static func snakeCase(_ name: String) -> String {
        var result = ""
        for character in name {
            if character.isUppercase, character.isASCII {
                result += "_" + character.lowercased()
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// The types of `android.notification`'s fields (the v1 reference's AndroidNotification).
    static let androidNotificationStrings: Set<String> = [
        "title", "body", "icon", "color", "sound", "tag", "click_action", "body_loc_key", "title_loc_key",
        "channel_id", "ticker", "event_time", "image", "notification_priority", "visibility", "proxy",
    ]
    static let androidNotificationStringLists: Set<String> = ["body_loc_args", "title_loc_args", "vibrate_timings"]
    static let androidNotificationBools: Set<String> = [
        "sticky", "local_only", "default_sound", "default_vibrate_timings", "default_light_settings",
        "bypass_proxy_notification",
    ]

    static func check(_ body: [UInt8]) -> Result<(message: JSONValue, validateOnly: Bool), Refusal> {
        do { return .success(try checked(body)) } catch { return .failure(error) }
    }

    private static func unknown(_ name: String, at place: String) -> Refusal {
        Refusal(message: "Invalid JSON payload received. Unknown name \"\(name)\" at '\(place)': Cannot find field.")
    }

    private static func checked(_ body: [UInt8]) throws(Refusal) -> (message: JSONValue, validateOnly: Bool) {
        guard let document = try? JSONParser.parse(body, duplicateKeys: .lastWins),
            case .object(let members) = document
        else { throw Refusal(message: "Invalid JSON payload received. Expected an object.") }
        let top = fields(members)
        for name in top.keys where name != "message" && name != "validate_only" {
            throw Refusal(message: "Invalid JSON payload received. Unknown name \"\(name)\": Cannot find field.")
        }
        var validateOnly = false
        if let flag = top["validate_only"] {
            guard case .bool(let value) = flag else {
                throw Refusal(message: "Invalid value at 'validate_only' (TYPE_BOOL)")
            }
            validateOnly = value
        }
        guard case .object(let given)? = top["message"] else {
            throw Refusal(message: "Request contains an invalid argument.", field: "message")
        }
        var message = fields(given)
        for name in message.keys where !messageMembers.contains(name) { throw unknown(name, at: "message") }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets.count == 1 else {
            throw Refusal(
                message: "Exactly one of message.token, message.topic or message.condition must be set.",
                field: "message")
        }
        if let token = message["token"] {
            guard case .string(let text) = token, isRegistrationToken(text) else {
                throw Refusal(
                    message: "The registration token is not a valid FCM registration token", field: "message.token")
            }
        }
        for name in ["topic", "condition", "name"] where message[name] != nil && message[name]?.stringValue == nil {
            throw Refusal(message: "Invalid value at 'message.\(name)' (TYPE_STRING)")
        }
        for name in ["webpush", "apns", "fcm_options"] where message[name] != nil && message[name]?.objectValue == nil {
            throw Refusal(message: "Invalid value at 'message.\(name)'")
        }
        if let data = message["data"] { try checkData(data, at: "message.data") }
        if case .object(let members)? = message["notification"] { message["notification"] = .object(fields(members)) }
        if case .object(let members)? = message["android"] {
            var android = fields(members)
            if case .object(let notification)? = android["notification"] {
                android["notification"] = .object(fields(notification))
            }
            message["android"] = .object(android)
        }
        if let notification = message["notification"] {
            guard case .object(let members) = notification else {
                throw Refusal(
                    message:
                        "Invalid value at 'message.notification' (type.googleapis.com/google.firebase.fcm.v1.Notification)"
                )
            }
            for (name, value) in members {
                guard notificationMembers.contains(name) else { throw unknown(name, at: "message.notification") }
                guard case .string = value else {
                    throw Refusal(message: "Invalid value at 'message.notification.\(name)' (TYPE_STRING)")
                }
            }
        }
        if let android = message["android"] { try checkAndroid(android) }
        let size = FCMMessage.payloadSize(of: .object(message))
        if size > FCMMessage.maximumPayloadSize {
            throw Refusal(
                message: "Message is too big: \(size) bytes; the maximum is \(FCMMessage.maximumPayloadSize).",
                field: "message")
        }
        return (.object(message), validateOnly)
    }

    /// Registration tokens are URL-safe text (letters, digits, `-`, `_`, `:`); FCM refuses anything else as "not a
    /// valid FCM registration token" and judges the rest by looking it up.
    static func isRegistrationToken(_ text: String) -> Bool { FCMRegistrationToken.problem(text) == nil }

    private static func checkData(_ data: JSONValue, at place: String) throws(Refusal) {
        guard case .object(let members) = data else { throw Refusal(message: "Invalid value at '\(place)'") }
        for (index, (key, value)) in members.sorted(by: { $0.key < $1.key }).enumerated() {
            guard case .string = value else {
                throw Refusal(
                    message: "Invalid value at '\(place)[\(index)].value' (TYPE_STRING), "
                        + String(decoding: JSONWriter.bytes(value), as: UTF8.self), field: "\(place)[\(index)].value")
            }
            if FCMMessage.isReservedDataKey(key) {
                throw Refusal(message: "Invalid data payload key: \(key)", field: place)
            }
        }
    }

    private static func checkAndroid(_ android: JSONValue) throws(Refusal) {
        guard case .object(let members) = android else {
            throw Refusal(message: "Invalid value at 'message.android'")
        }
        for name in members.keys where !androidMembers.contains(name) { throw unknown(name, at: "message.android") }
        if let priority = members["priority"] {
            switch priority {
            case .string(let name) where name == "NORMAL" || name == "HIGH": break
            case .int(let number) where (0...1).contains(number): break
            default:
                throw Refusal(
                    message: "Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1."
                        + "AndroidMessagePriority), \(String(decoding: JSONWriter.bytes(priority), as: UTF8.self))")
            }
        }
        if let ttl = members["ttl"] {
            guard case .string(let text) = ttl, let seconds = durationSeconds(text) else {
                throw Refusal(
                    message: "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration)")
            }
            if seconds > Double(FCMMessage.maximumTTLSeconds) {
                throw Refusal(message: "The TTL cannot be more than 4 weeks.", field: "message.android.ttl")
            }
        }
        if let key = members["collapse_key"], key.stringValue == nil {
            throw Refusal(message: "Invalid value at 'message.android.collapse_key' (TYPE_STRING)")
        }
        if let data = members["data"] { try checkData(data, at: "message.android.data") }
        if let name = members["restricted_package_name"], name.stringValue == nil {
            throw Refusal(message: "Invalid value at 'message.android.restricted_package_name' (TYPE_STRING)")
        }
        for flag in ["direct_boot_ok", "bandwidth_constrained_ok", "restricted_satellite_ok"] {
            if let value = members[flag], case .bool = value {
            } else if members[flag] != nil {
                throw Refusal(message: "Invalid value at 'message.android.\(flag)' (TYPE_BOOL)")
            }
        }
        if let notification = members["notification"] {
            guard case .object(let fields) = notification else {
                throw Refusal(message: "Invalid value at 'message.android.notification'")
            }
            for (name, value) in fields {
                guard androidNotificationMembers.contains(name) else {
                    throw unknown(name, at: "message.android.notification")
                }
                let place = "message.android.notification.\(name)"
                if androidNotificationStrings.contains(name), value.stringValue == nil {
                    throw Refusal(message: "Invalid value at '\(place)' (TYPE_STRING)")
                }
                if androidNotificationBools.contains(name), case .bool = value {
                } else if androidNotificationBools.contains(name) {
                    throw Refusal(message: "Invalid value at '\(place)' (TYPE_BOOL)")
                }
                if androidNotificationStringLists.contains(name) {
                    guard case .array(let items) = value, items.allSatisfy({ $0.stringValue != nil }) else {
                        throw Refusal(message: "Invalid value at '\(place)' (TYPE_STRING)")
                    }
                }
                if name == "notification_count" {
                    // An int32: a JSON number, or its decimal string (protobuf's JSON mapping takes both).
                    switch value {
                    case .int(let count) where Int64(Int32.min)...Int64(Int32.max) ~= count: break
                    case .string(let text) where Int32(text) != nil: break
                    default: throw Refusal(message: "Invalid value at '\(place)' (TYPE_INT32)")
                    }
                }
            }
        }
    }

    /// A protobuf JSON `Duration`: decimal seconds with up to nine fraction digits and an `s`.
    static func durationSeconds(_ text: String) -> Double? {
        guard text.hasSuffix("s") else { return nil }
        let number = text.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !parts[0].isEmpty, parts[0].allSatisfy(\.isASCII),
            parts[0].allSatisfy(\.isNumber)
        else { return nil }
        if parts.count == 2 {
            guard (1...9).contains(parts[1].count), parts[1].allSatisfy({ $0.isASCII && $0.isNumber }) else {
                return nil
            }
        }
        return Double(number)
    }
}
