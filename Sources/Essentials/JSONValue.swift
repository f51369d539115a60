public import Foundation

/// An arbitrary JSON value that round-trips APNs payloads without losing unknown keys.
///
/// Numbers that decode exactly as a 64-bit integer (including `1.0` and `1e3`) are kept as `.int`: this matches
/// how `NSNumber` bridges to `Int` on iOS, which is what the reference extension relies on.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue {
    /// The member named `key` when this is an object.
    @inlinable
    public subscript(key: String) -> JSONValue? {
        get {
            if case .object(let object) = self { return object[key] }
            return nil
        }
        set {
            guard case .object(var object) = self else { return }
            object[key] = newValue
            self = .object(object)
        }
    }

    /// The string value, if this is a string.
    @inlinable
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The object members, if this is an object.
    @inlinable
    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The numeric value of a JSON number, or of a string that holds a decimal number.
    public var lenientDouble: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        case .string(let value):
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, let parsed = Double(trimmed), parsed.isFinite else { return nil }
            return parsed
        default: return nil
        }
    }

    /// A short name of the JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSONValue {
    /// Encodes the value as compact JSON with sorted keys (stable output, byte-exact size checks).
    public func encodedData() -> Data { Data(JSONWriter.bytes(self)) }

    /// The encoded size in bytes.
    public var encodedSize: Int { JSONWriter.encodedLength(self) }

    /// Decodes a JSON document.
    public static func decode(_ data: Data) throws(JSONParseError) -> JSONValue {
        try JSONParser.parse(data)
    }
}
