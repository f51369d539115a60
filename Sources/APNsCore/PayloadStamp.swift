public import Essentials
import Foundation

/// Fills in "now" so sample payloads are never stale by accident.
///
/// A string value `"{{now}}"` anywhere in the payload becomes the current epoch seconds as a JSON integer, and
/// `"{{now_string}}"` becomes them as a string (for the legacy top-level shape); with `forceTimestamp`,
/// `aps.timestamp` is set to now even when the file has another value.
public enum PayloadStamp {
    public static let placeholder = "{{now}}"
    public static let stringPlaceholder = "{{now_string}}"

    /// The payload with placeholders replaced; returns the value unchanged when there is nothing to fill.
    public static func stamp(_ value: JSONValue, now: Int64, forceTimestamp: Bool = false) -> JSONValue {
        var stamped = replace(value, now: now)
        if forceTimestamp, case .object(var root) = stamped {
            var aps = root["aps"]?.objectValue ?? [:]
            aps["timestamp"] = .int(now)
            root["aps"] = .object(aps)
            stamped = .object(root)
        }
        return stamped
    }

    static func replace(_ value: JSONValue, now: Int64) -> JSONValue {
        switch value {
        case .string(placeholder): .int(now)
        case .string(stringPlaceholder): .string(String(now))
        case .array(let items): .array(items.map { replace($0, now: now) })
        case .object(let members): .object(members.mapValues { replace($0, now: now) })
        default: value
        }
    }
}
