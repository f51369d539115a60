/// Streams one JSON object straight to bytes, in the order fields are written (no intermediate dictionary).
///
/// Nil values are left out, as `JSONEncoder` does.
///
/// The writing methods are `@inlinable`: a response writes dozens of members from other modules, and each call
/// must compile down to appends into one buffer, as it did when the writer lived next to its callers.
public struct JSONObjectWriter {
    /// The bytes written so far (the object is still open).
    @usableFromInline var bytes: [UInt8]
    @usableFromInline var first = true

    @inlinable
    public init(capacity: Int = 1024) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    @inlinable
    mutating func key(_ key: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        JSONWriter.writeString(key, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    @inlinable
    public mutating func field(_ name: String, _ value: String?) {
        guard let value else { return }
        key(name)
        JSONWriter.writeString(value, into: &bytes)
    }

    @inlinable
    public mutating func field(_ name: String, _ value: Double?) {
        guard let value else { return }
        key(name)
        JSONWriter.writeDouble(value, into: &bytes)
    }

    @inlinable
    public mutating func field(_ name: String, _ value: Int64?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    @inlinable
    public mutating func field(_ name: String, _ value: Int) { field(name, Int64(value)) }

    @inlinable
    public mutating func field(_ name: String, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
    }

    /// A member whose value is already written JSON (a document's bytes), copied as it is.
    @inlinable
    public mutating func field(_ name: String, rawJSON value: [UInt8]) {
        key(name)
        bytes.append(contentsOf: value)
    }

    @inlinable
    public mutating func field(_ name: String, json value: JSONValue?) {
        guard let value else { return }
        key(name)
        JSONWriter.write(value, into: &bytes)
    }

    @inlinable
    public mutating func field(_ name: String, strings: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, string) in strings.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(string, into: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A string member given as its UTF-8 bytes, escaped as a `String` value is.
    @inlinable
    public mutating func field(_ name: String, utf8 value: UnsafeBufferPointer<UInt8>) {
        key(name)
        bytes.append(UInt8(ascii: "\""))
        JSONWriter.writeEscaped(utf8: value, into: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// An array of `count` strings, each given as its UTF-8 bytes by `element` (called in order).
    @inlinable
    public mutating func strings(_ name: String, count: Int, _ element: (Int) -> UnsafeBufferPointer<UInt8>) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for i in 0..<count {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "\""))
            JSONWriter.writeEscaped(utf8: element(i), into: &bytes)
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A nested object, written by `body` into the same buffer.
    @inlinable
    public mutating func object(_ name: String, _ body: (inout JSONObjectWriter) -> Void) {
        key(name)
        nested(body)
    }

    @inlinable
    mutating func nested(_ body: (inout JSONObjectWriter) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        first = true
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        first = false
    }

    /// An array of objects, each written by `body`.
    @inlinable
    public mutating func array<T>(_ name: String, _ items: [T], _ body: (T, inout JSONObjectWriter) -> Void) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, item) in items.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            nested { body(item, &$0) }
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// The object's bytes, closed.
    @inlinable
    public consuming func finished() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}

/// A value written as one JSON object by `JSONObjectWriter`: the one way the project writes JSON output
/// (responses, `--json` output). Payloads and other pass-through documents are `JSONValue`s, written with
/// `field(_:json:)` or `JSONWriter`.
public protocol JSONObjectRepresentable {
    /// Writes the object's members, in the order they should appear.
    func writeJSON(into object: inout JSONObjectWriter)
}

extension JSONObjectRepresentable {
    /// The encoded object.
    public var jsonBytes: [UInt8] {
        var object = JSONObjectWriter()
        writeJSON(into: &object)
        return object.finished()
    }
}

extension JSONObjectWriter {
    /// A nested object from a value that writes itself.
    @inlinable
    public mutating func field(_ name: String, object value: (some JSONObjectRepresentable)?) {
        guard let value else { return }
        object(name) { value.writeJSON(into: &$0) }
    }

    /// An array of objects that write themselves.
    @inlinable
    public mutating func field(_ name: String, objects items: [some JSONObjectRepresentable]) {
        array(name, items) { item, object in item.writeJSON(into: &object) }
    }

    /// An object of integer counts, keys sorted.
    @inlinable
    public mutating func field(_ name: String, counts: [String: Int]) {
        object(name) { object in
            for (key, count) in counts.sorted(by: { $0.key < $1.key }) { object.field(key, count) }
        }
    }
}

extension JSONWriter {
    /// A top-level JSON array of objects that write themselves (e.g. one result per token).
    public static func array(_ items: [some JSONObjectRepresentable]) -> [UInt8] {
        var output: [UInt8] = [UInt8(ascii: "[")]
        for (position, item) in items.enumerated() {
            if position > 0 { output.append(UInt8(ascii: ",")) }
            output.append(contentsOf: item.jsonBytes)
        }
        output.append(UInt8(ascii: "]"))
        return output
    }
}
