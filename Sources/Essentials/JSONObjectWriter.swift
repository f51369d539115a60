/// Streams one JSON object straight to bytes, in the order fields are written (no intermediate dictionary).
///
/// Nil values are left out, as `JSONEncoder` does.
public struct JSONObjectWriter {
    public private(set) var bytes: [UInt8]
    private var first = true

    public init(capacity: Int = 1024) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    private mutating func key(_ key: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        JSONWriter.writeString(key, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func field(_ name: String, _ value: String?) {
        guard let value else { return }
        key(name)
        JSONWriter.writeString(value, into: &bytes)
    }

    public mutating func field(_ name: String, _ value: Double?) {
        guard let value else { return }
        key(name)
        JSONWriter.write(.double(value), into: &bytes)
    }

    public mutating func field(_ name: String, _ value: Int64?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func field(_ name: String, _ value: Int) { field(name, Int64(value)) }

    public mutating func field(_ name: String, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
    }

    public mutating func field(_ name: String, json value: JSONValue?) {
        guard let value else { return }
        key(name)
        JSONWriter.write(value, into: &bytes)
    }

    public mutating func field(_ name: String, strings: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, string) in strings.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(string, into: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A nested object, written by `body` into the same buffer.
    public mutating func object(_ name: String, _ body: (inout JSONObjectWriter) -> Void) {
        key(name)
        nested(body)
    }

    private mutating func nested(_ body: (inout JSONObjectWriter) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        first = true
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        first = false
    }

    /// An array of objects, each written by `body`.
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
    public mutating func field(_ name: String, object value: (some JSONObjectRepresentable)?) {
        guard let value else { return }
        object(name) { value.writeJSON(into: &$0) }
    }

    /// An array of objects that write themselves.
    public mutating func field(_ name: String, objects items: [some JSONObjectRepresentable]) {
        array(name, items) { item, object in item.writeJSON(into: &object) }
    }

    /// An object of integer counts, keys sorted.
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
