import Foundation

/// Writes `JSONValue` as compact UTF-8 JSON with sorted object keys (stable output, byte-exact sizes).
///
/// Slashes and non-ASCII characters are written as they are; quotes, backslashes and control characters are
/// escaped. Non-finite doubles, which JSON cannot express, are written as `null`.
public enum JSONWriter {
    /// The encoded bytes of `value`.
    public static func bytes(_ value: JSONValue) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(512)
        write(value, into: &output)
        return output
    }

    /// Appends the encoding of `value` to `output`.
    public static func write(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let flag): output.append(contentsOf: flag ? "true".utf8 : "false".utf8)
        case .int(let number): output.append(contentsOf: String(number).utf8)
        case .double(let number): writeDouble(number, into: &output)
        case .string(let string): writeString(string, into: &output)
        case .array(let items):
            output.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { output.append(UInt8(ascii: ",")) }
                write(item, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (i, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { output.append(UInt8(ascii: ",")) }
                writeString(member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                write(member.value, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    @usableFromInline static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `number` as `description` spells it (the shortest text that reads back as the same double), or
    /// `null` when it is not finite, without making a `String` of it: `Double.write(to:)` hands its digits to the
    /// stream's `_writeASCII`, which copies them into `output`. (A `description` longer than 15 bytes, as most
    /// coordinates and distances are, is a heap allocation; an answer has about 15 of them.)
    public static func writeDouble(_ number: Double, into output: inout [UInt8]) {
        guard number.isFinite else {
            output.append(contentsOf: "null".utf8)
            return
        }
        var sink = ByteSink()
        swap(&sink.bytes, &output)
        number.write(to: &sink)
        swap(&sink.bytes, &output)
    }

    /// A text stream into a byte array (`writeDouble`).
    struct ByteSink: TextOutputStream {
        var bytes: [UInt8] = []
        mutating func write(_ string: String) { bytes.append(contentsOf: string.utf8) }
        mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: buffer) }
    }

    /// The number of bytes `write` would append for `value`, counted without writing: no buffer, and no sort of
    /// an object's keys (the length does not depend on their order). An enrichment measures its payload against
    /// APNs' limit before anything else, and writing it only to count it took a third of the answer's writing.
    public static func encodedLength(_ value: JSONValue) -> Int {
        switch value {
        case .null: return 4
        case .bool(let flag): return flag ? 4 : 5
        case .int(let number): return decimalLength(number)
        case .double(let number): return number.isFinite ? number.description.utf8.count : 4
        case .string(let string): return escapedLength(string) + 2
        case .array(let items):
            var length = 2 + max(0, items.count - 1)
            for item in items { length += encodedLength(item) }
            return length
        case .object(let members):
            var length = 2 + max(0, members.count - 1)
            for (key, member) in members { length += escapedLength(key) + 3 + encodedLength(member) }
            return length
        }
    }

    /// The length of `String(number)`.
    static func decimalLength(_ number: Int64) -> Int {
        var length = number < 0 ? 2 : 1
        var rest = number.magnitude / 10
        while rest > 0 {
            length += 1
            rest /= 10
        }
        return length
    }

    /// The number of bytes `string`'s contents take once escaped, without the surrounding quotes.
    public static func escapedLength(_ string: String) -> Int {
        var length = 0
        for byte in string.utf8 {
            switch byte {
            case 0x22, 0x5C, 0x0A, 0x0D, 0x09, 0x08, 0x0C: length += 2
            case 0..<0x20: length += 6
            default: length += 1
            }
        }
        return length
    }

    @inlinable
    public static func writeString(_ string: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        writeEscaped(string, into: &output)
        output.append(UInt8(ascii: "\""))
    }

    /// Appends `string`'s contents escaped as in a JSON string, without the quotes.
    @inlinable
    public static func writeEscaped(_ string: String, into output: inout [UInt8]) {
        var string = string
        string.withUTF8 { writeEscaped(utf8: $0, into: &output) }
    }

    /// Appends UTF-8 bytes escaped as in a JSON string, without the quotes. Runs of bytes that need no escape are
    /// found eight at a time and copied whole.
    @inlinable
    public static func writeEscaped(utf8: UnsafeBufferPointer<UInt8>, into output: inout [UInt8]) {
        let count = utf8.count
        var start = 0
        var i = 0
        while i < count {
            if i + 8 <= count,
                !mayNeedEscape(UnsafeRawPointer(utf8.baseAddress! + i).loadUnaligned(as: UInt64.self))
            {
                i += 8
                continue
            }
            let byte = utf8[i]
            i += 1
            if byte >= 0x20, byte != 0x22, byte != 0x5C { continue }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<(i - 1)]))
            start = i
            switch byte {
            case 0x22: output.append(contentsOf: [0x5C, 0x22])
            case 0x5C: output.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: output.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x08: output.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: output.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            default:
                output.append(contentsOf: [
                    0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                ])
            }
        }
        output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<count]))
    }

    /// Whether any of eight bytes is below 0x20, a quote or a backslash (never false when one is; a true answer is
    /// checked byte by byte).
    @inlinable
    static func mayNeedEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ v: UInt64) -> UInt64 { (v &- ones) & ~v & highs }
        let control = (word &- ones &* 0x20) & ~word & highs
        return control | hasZero(word ^ (ones &* 0x22)) | hasZero(word ^ (ones &* 0x5C)) != 0
    }
}
