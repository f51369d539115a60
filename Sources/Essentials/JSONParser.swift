public import Foundation

/// A strict RFC 8259 JSON parser straight into `JSONValue` (much faster than `Codable` for a recursive enum).
///
/// Numbers without a fraction or exponent that fit in 64 bits become `.int`; other numbers become `.double`, except
/// integral values within ±2^53 (`1.0`, `1e3`), which become `.int` as `NSNumber` bridging does on iOS.
/// Nesting deeper than `maximumDepth` is refused so hostile input cannot exhaust the stack.
public struct JSONParser {
    /// Deepest nesting of arrays and objects accepted.
    public static let maximumDepth = 128

    /// What a key that appears twice in one object means.
    public enum DuplicateKeys: Sendable {
        /// An error, as a strict reader answers: RFC 8259 leaves the meaning open, and two readers of one
        /// document could see different values (the service's requests).
        case refuse
        /// The last one wins, as most readers do (what a peer such as APNs is not shown to refuse).
        case lastWins
    }

    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    private let refusesDuplicates: Bool
    /// The members of the objects being parsed, the innermost object's last. An object's members gather here and
    /// become its dictionary when it closes, made at its final size: no table grown and rehashed member by member,
    /// each key hashed once (a fix report is a hundred objects of four or five members).
    private var members: [(key: String, value: JSONValue)] = []
    /// Up to this many members, a key is looked for among the object's earlier ones by comparing them; past it,
    /// through a set (so a hostile object of many keys costs no more than a dictionary would).
    private static let linearDuplicateCheck = 16

    private init(_ bytes: UnsafeBufferPointer<UInt8>, duplicateKeys: DuplicateKeys = .refuse) {
        self.bytes = bytes
        self.refusesDuplicates = duplicateKeys == .refuse
    }

    /// Parses one JSON document (surrounding whitespace allowed); a key twice in one object is refused unless
    /// `duplicateKeys` is `.lastWins`.
    public static func parse(_ data: some ContiguousBytes, duplicateKeys: DuplicateKeys = .refuse)
        throws(JSONParseError) -> JSONValue
    {
        let result: Result<JSONValue, JSONParseError> = data.withUnsafeBytes { raw in
            var parser = JSONParser(raw.bindMemory(to: UInt8.self), duplicateKeys: duplicateKeys)
            do throws(JSONParseError) {
                parser.skipWhitespace()
                let value = try parser.parseValue(depth: 0)
                parser.skipWhitespace()
                guard parser.index == parser.bytes.count else {
                    throw parser.error("unexpected data after the JSON value")
                }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// An object whose array member `name` was handed out element by element instead of being kept.
    public struct StreamedObject: Sendable {
        /// The other members (and `name` itself when it was not an array).
        public var members: [String: JSONValue]
        /// True when `name` was present and an array (its elements went to the callback).
        public var streamed: Bool
        /// The message of the error thrown when the document is not an object.
        public static let notAnObject = "expected a JSON object"
    }

    /// Parses a document that must be an object, passing each element of its array member `name` to `each`
    /// (with its index) as soon as it is read, so a huge array is never held as a whole. `each` returns false
    /// to stop; the parse then ends with an error.
    public static func parseObject(
        _ data: some ContiguousBytes, streaming name: String, each: (Int, JSONValue) -> Bool
    ) throws(JSONParseError) -> StreamedObject {
        try parseObject(data, streamingElements: name) { index, element in each(index, element.value) }
    }

    /// One element of an array handed out by `parseObject(_:streamingElements:each:)`.
    public enum StreamedElement {
        /// An object, as its members (for a reader that looks up a few known keys, cheaper than a dictionary).
        case object(JSONMembers)
        /// Any other value.
        case value(JSONValue)

        /// The element as a `JSONValue` (an object's members made into its dictionary).
        public var value: JSONValue {
            switch self {
            case .object(let members): .object(members.dictionary)
            case .value(let value): value
            }
        }
    }

    /// `parseObject(_:streaming:each:)`, handing out an element that is an object as its members, without making
    /// a dictionary of them: a fix report is a hundred objects of four or five members, each read once by key.
    public static func parseObject(
        _ data: some ContiguousBytes, streamingElements name: String, each: (Int, StreamedElement) -> Bool
    ) throws(JSONParseError) -> StreamedObject {
        let result: Result<StreamedObject, JSONParseError> = data.withUnsafeBytes { raw in
            var parser = JSONParser(raw.bindMemory(to: UInt8.self))
            do throws(JSONParseError) {
                parser.skipWhitespace()
                guard parser.index < parser.bytes.count, parser.bytes[parser.index] == UInt8(ascii: "{") else {
                    throw parser.error(StreamedObject.notAnObject)
                }
                let object = try parser.parseStreamingObject(member: name, each: each)
                parser.skipWhitespace()
                guard parser.index == parser.bytes.count else {
                    throw parser.error("unexpected data after the JSON value")
                }
                return .success(object)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private mutating func parseStreamingObject(member name: String, each: (Int, StreamedElement) -> Bool)
        throws(JSONParseError) -> StreamedObject
    {
        index += 1
        var object = StreamedObject(members: [:], streamed: false)
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return object
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw error("expected ':' after a key")
            }
            index += 1
            skipWhitespace()
            if refusesDuplicates, object.members[key] != nil || (key == name && object.streamed) {
                throw duplicate(key)
            }
            if key == name, index < bytes.count, bytes[index] == UInt8(ascii: "[") {
                try streamArray(each: each)
                object.streamed = true
                object.members.removeValue(forKey: key)
            } else {
                object.members[key] = try parseValue(depth: 1)
                if key == name { object.streamed = false }
            }
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return object
            }
            throw error("expected ',' or '}' in an object")
        }
    }

    private mutating func streamArray(each: (Int, StreamedElement) -> Bool) throws(JSONParseError) {
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return
        }
        var count = 0
        while true {
            skipWhitespace()
            let kept: Bool
            if index < bytes.count, bytes[index] == UInt8(ascii: "{") {
                // An object's members go to the reader as they lie on the stack: no dictionary made of them.
                kept = try withObjectMembers(depth: 3) { each(count, .object($0)) }
            } else {
                kept = each(count, .value(try parseValue(depth: 2)))
            }
            guard kept else { throw error("stopped by the reader") }
            count += 1
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return
            }
            throw error("expected ',' or ']' in an array")
        }
    }

    func error(_ message: String) -> JSONParseError { JSONParseError(offset: index, message: message) }

    private func duplicate(_ key: String) -> JSONParseError {
        let shown = key.utf8.count <= 64 ? key : String(decoding: key.utf8.prefix(64), as: UTF8.self) + "…"
        return error(
            "the key '\(shown)' appears twice in one object (each key once: which one would count is not defined)")
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character '\(Character(Unicode.Scalar(bytes[index])))'")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("invalid literal") }
        let pointer = literal.utf8Start
        for offset in 0..<count where bytes[index + offset] != pointer[offset] {
            throw error("invalid literal")
        }
        index += count
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        try withObjectMembers(depth: depth) { .object($0.dictionary) }
    }

    /// Parses the object at `index` and gives `body` its members, then takes them off the stack.
    private mutating func withObjectMembers<T>(depth: Int, _ body: (JSONMembers) -> T) throws(JSONParseError) -> T {
        let base = members.count
        // The nested objects have taken their members off by the time this one closes; on an error this one's go.
        defer { members.removeSubrange(base...) }
        try parseMembers(depth: depth)
        return body(JSONMembers(members: members[base...]))
    }

    /// Parses the object at `index` (its `{`), leaving its members on `members` in document order; what it added is
    /// the caller's to remove, on an error too.
    private mutating func parseMembers(depth: Int) throws(JSONParseError) {
        guard depth <= Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth) levels") }
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return
        }
        let base = members.count
        // The keys seen, once the object has more than `linearDuplicateCheck` members (refusing duplicates only).
        var seen: Set<String>?
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw error("expected ':' after a key")
            }
            index += 1
            skipWhitespace()
            if refusesDuplicates {
                if seen == nil, members.count - base >= Self.linearDuplicateCheck {
                    seen = Set(members[base...].map(\.key))
                }
                let twice = seen.map { $0.contains(key) } ?? members[base...].contains { $0.key == key }
                if twice { throw duplicate(key) }
                seen?.insert(key)
            }
            let value = try parseValue(depth: depth)
            members.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return
            }
            throw error("expected ',' or '}' in an object")
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth) levels") }
        index += 1
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            array.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(array)
            }
            throw error("expected ',' or ']' in an array")
        }
    }
}

/// An object's members in document order (each key once, unless parsed with `.lastWins`), read by key without a
/// dictionary: for an object of a few members each looked up once, comparing keys costs less than hashing them into
/// a table and hashing them again to look them up. Valid while the parser's callback runs (it is a copy otherwise).
public struct JSONMembers {
    let members: ArraySlice<(key: String, value: JSONValue)>

    /// How many members the object has.
    public var count: Int { members.count }

    /// The value of the member `key`, or nil (the last one of a key given twice).
    public subscript(key: String) -> JSONValue? {
        members.last { $0.key == key }?.value
    }

    /// The members as a dictionary (what `JSONValue.object` holds), made at its final size. In order, so that with
    /// `.lastWins` the last of a key's members is the one kept.
    public var dictionary: [String: JSONValue] {
        var object = [String: JSONValue](minimumCapacity: members.count)
        for member in members { object[member.key] = member.value }
        return object
    }
}
