import Essentials
import Foundation
import TestSupport
import Testing

/// Our parser against Foundation's `JSONSerialization` on generated documents, valid and broken: both must
/// accept the same documents, and read the same values from them.
@Suite("JSON parser vs JSONSerialization (property tests, fixed seed)")
struct JSONParserPropertyTests {
    /// Number spellings at the edges: huge, tiny, negative zero, exponents, beyond 64 bits.
    static let numbers = [
        "0", "-0", "-0.0", "1", "-1", "1e3", "1E+2", "0.1e-2", "1e308", "-1e308", "1e309", "2.5e-308",
        "4.9e-324", "1e-400", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
        "123456789012345678901234567890", "1.7976931348623157e308", "0.30000000000000004",
        "9007199254740993", "1589288354", "1589288354.5", "01", "1.", ".5", "+1", "-", "1e", "0x1F",
    ]
    /// String bodies: escapes, surrogate pairs, lone surrogates, raw non-ASCII, and ill-formed UTF-8.
    static let strings: [[UInt8]] = [
        Array("plain".utf8), Array("é😀".utf8), Array(#"\"\\\/\b\f\n\r\t"#.utf8), Array(#"\u00e9\ud83d\ude00"#.utf8),
        Array(#"\ud800"#.utf8), Array(#"\udc00x"#.utf8), Array(#"\ud800\u0041"#.utf8), Array(#"\u0000"#.utf8),
        [0xC3, 0x28], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC0, 0xAF], [0xE2, 0x82], [0x80], [0xFF],
        [0xF0, 0x9F, 0x98, 0x80], Array(#"\x"#.utf8), [0x01], Array("".utf8),
    ]

    struct Writer {
        var generator: SeededGenerator
        var bytes: [UInt8] = []

        mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &generator)] }
        mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &generator) < p }

        mutating func value(depth: Int) {
            let leaf = depth > 5 || chance(0.4)
            switch Int.random(in: 0..<(leaf ? 4 : 6), using: &generator) {
            case 0: bytes += Array(pick(["true", "false", "null"]).utf8)
            case 1: bytes += Array(pick(JSONParserPropertyTests.numbers).utf8)
            case 2, 3: string()
            case 4:
                bytes.append(UInt8(ascii: "["))
                for index in 0..<Int.random(in: 0..<4, using: &generator) {
                    if index > 0 { bytes.append(UInt8(ascii: ",")) }
                    whitespace()
                    value(depth: depth + 1)
                    whitespace()
                }
                bytes.append(UInt8(ascii: "]"))
            default:
                bytes.append(UInt8(ascii: "{"))
                let keys = (0..<Int.random(in: 0..<4, using: &generator)).map { _ in pick(["a", "b", "é", "a"]) }
                for (index, key) in keys.enumerated() {  // "a" twice: duplicate keys
                    if index > 0 { bytes.append(UInt8(ascii: ",")) }
                    bytes += Array("\"\(key)\"".utf8)
                    whitespace()
                    bytes.append(UInt8(ascii: ":"))
                    whitespace()
                    value(depth: depth + 1)
                }
                bytes.append(UInt8(ascii: "}"))
            }
        }

        mutating func string() {
            bytes.append(UInt8(ascii: "\""))
            for _ in 0..<Int.random(in: 0..<3, using: &generator) { bytes += pick(JSONParserPropertyTests.strings) }
            bytes.append(UInt8(ascii: "\""))
        }

        mutating func whitespace() { if chance(0.2) { bytes += Array(pick([" ", "\n", "\t", "\r\n "]).utf8) } }

        /// Byte-level damage to an otherwise generated document.
        mutating func damage() {
            guard !bytes.isEmpty else { return }
            let position = Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0..<4, using: &generator) {
            case 0: bytes.removeSubrange(position...)
            case 1: bytes[position] = pick([0x80, 0xFF, 0xC3, 0x22, 0x5C, 0x2C, 0x5D, 0x7D, 0x30, 0x65, 0x2D, 0x20])
            case 2: bytes.remove(at: position)
            default: bytes.insert(pick([0x2C, 0x22, 0x5B, 0x7B, 0xED]), at: position)
            }
        }
    }

    /// Foundation's value in our terms; numbers as Double (compared with a relative tolerance).
    enum Shape: Equatable {
        case null
        case bool(Bool)
        case number(Double)
        case string(String)
        case array([Shape])
        case object([String: Shape])

        static func from(foundation value: Any) -> Shape {
            switch value {
            case is NSNull: return .null
            case let string as String: return .string(string)
            case let array as [Any]: return .array(array.map(from(foundation:)))
            case let object as [String: Any]: return .object(object.mapValues(from(foundation:)))
            case let number as NSNumber:
                if String(describing: type(of: number)).contains("Boolean") { return .bool(number.boolValue) }
                return .number(number.doubleValue)
            default: return .string("unexpected \(type(of: value))")
            }
        }

        static func from(_ value: JSONValue) -> Shape {
            switch value {
            case .null: .null
            case .bool(let flag): .bool(flag)
            case .int(let number): .number(Double(number))
            case .double(let number): .number(number)
            case .string(let string): .string(string)
            case .array(let array): .array(array.map(from))
            case .object(let object): .object(object.mapValues(from))
            }
        }

        func matches(_ other: Shape) -> Bool {
            switch (self, other) {
            case (.number(let a), .number(let b)): return a == b || abs(a - b) <= 1e-15 * max(abs(a), abs(b))
            case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { $0.matches($1) }
            case (.object(let a), .object(let b)):
                return a.count == b.count && a.allSatisfy { key, value in b[key].map(value.matches) ?? false }
            default: return self == other
            }
        }
    }

    @Test("20,000 generated documents (a third of them damaged): same verdict, same values")
    func agreesWithFoundation() throws {
        var writer = Writer(generator: SeededGenerator(seed: 8259))
        var accepted = 0
        var refused = 0
        for round in 0..<20_000 {
            writer.bytes = []
            writer.whitespace()
            writer.value(depth: 0)
            writer.whitespace()
            if round % 3 == 0 { writer.damage() }
            let document = Data(writer.bytes)
            // Foundation takes a key twice in one object (the last wins): compared in that mode; the strict
            // default refuses exactly those documents besides (JSONCodecTests).
            let ours = try? JSONParser.parse(document, duplicateKeys: .lastWins)
            let theirs = try? JSONSerialization.jsonObject(with: document, options: [.fragmentsAllowed])
            let text = String(decoding: writer.bytes.prefix(200), as: UTF8.self)
            if Self.foundationIsLenient(writer.bytes) {
                // RFC 8259 refuses these; Foundation lets some through. We side with the RFC.
                #expect(ours == nil, "accepted a document RFC 8259 refuses: \(text)")
                continue
            }
            #expect((ours == nil) == (theirs == nil), "verdicts differ on \(writer.bytes.prefix(200)) \(text)")
            if let ours, let theirs {
                accepted += 1
                #expect(Shape.from(ours).matches(Shape.from(foundation: theirs)), "values differ on \(text)")
            } else if ours == nil {
                refused += 1
            }
        }
        // The generator must exercise both sides.
        #expect(accepted > 2_000)
        #expect(refused > 2_000)
    }

    @Test("the counted length of a value is the length of its writing, on 20,000 generated documents")
    func countedLengthIsWrittenLength() throws {
        var writer = Writer(generator: SeededGenerator(seed: 4177))
        var compared = 0
        for _ in 0..<20_000 {
            writer.bytes = []
            writer.value(depth: 0)
            guard let value = try? JSONParser.parse(Data(writer.bytes), duplicateKeys: .lastWins) else { continue }
            compared += 1
            #expect(JSONWriter.encodedLength(value) == JSONWriter.bytes(value).count, "\(value)")
            #expect(value.encodedSize == JSONWriter.bytes(value).count)
        }
        for number in [0, 9, 10, -1, -10, 99, 100, Int64.max, Int64.min, Int64.min + 1, 1_589_288_354] as [Int64] {
            #expect(JSONWriter.encodedLength(.int(number)) == String(number).utf8.count, "\(number)")
        }
        for double in [0.1, -0.0, 1e308, .infinity, .nan, 5e-324, 1_589_288_354.5] {
            #expect(JSONWriter.encodedLength(.double(double)) == JSONWriter.bytes(.double(double)).count)
        }
        #expect(compared > 10_000)
    }

    @Test("a double is written as its description spells it, on 100,000 random bit patterns; not finite: null")
    func doublesAsDescription() {
        var generator = SeededGenerator(seed: 907)
        for _ in 0..<100_000 {
            let number = Double(bitPattern: UInt64.random(in: .min ... .max, using: &generator))
            var written: [UInt8] = [0x5B]
            JSONWriter.writeDouble(number, into: &written)
            let expected = number.isFinite ? "[" + number.description : "[null"
            #expect(String(decoding: written, as: UTF8.self) == expected, "\(number.bitPattern)")
        }
        for number in [0.0, -0.0, 1, 100, 0.1, 46.04187359932134, 1_795_902_323, 1e308, 5e-324, -.infinity, .nan] {
            var object = JSONObjectWriter()
            object.field("x", number)
            let expected = number.isFinite ? "{\"x\":\(number.description)}" : "{\"x\":null}"
            #expect(String(decoding: object.finished(), as: UTF8.self) == expected)
        }
    }

    /// Where Foundation departs from RFC 8259: a trailing comma after some values (`[-0,]`), and a number out of
    /// Double's range that a later duplicate key replaces (`{"a":1e309,"a":1}`). Seen with Swift 6.3's Foundation.
    static func foundationIsLenient(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: ",") {
                var next = index + 1
                while next < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[next]) { next += 1 }
                if next < bytes.count, bytes[next] == UInt8(ascii: "]") || bytes[next] == UInt8(ascii: "}") {
                    return true
                }
            }
            index += 1
        }
        return bytes.firstRange(of: Array("1e309".utf8)) != nil
    }

    @Test("deep nesting: both accept 128 levels; beyond our limit we refuse with an error, never a crash")
    func nesting() throws {
        let ok = Data((String(repeating: "[", count: 128) + String(repeating: "]", count: 128)).utf8)
        #expect(try JSONParser.parse(ok) != .null)
        #expect((try? JSONSerialization.jsonObject(with: ok)) != nil)
        let deep = Data((String(repeating: "[", count: 129) + String(repeating: "]", count: 129)).utf8)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
    }

    @Test(
        "ill-formed UTF-8 is refused at the offending byte",
        arguments: [
            ([0xC3, 0x28], 1), ([0xED, 0xA0, 0x80], 1), ([0xF4, 0x90, 0x80, 0x80], 1), ([0xC0, 0xAF], 1),
            ([0xE2, 0x82], 1),
            ([0x61, 0x80], 2), ([0x61, 0x5C, 0x6E, 0xFF], 4), ([0xF8, 0x88, 0x80, 0x80, 0x80], 1),
        ] as [([UInt8], Int)])
    func invalidUTF8(body: [UInt8], offset: Int) {
        let document = Data([0x22] + body + [0x22])
        do {
            _ = try JSONParser.parse(document)
            Issue.record("accepted \(body)")
        } catch {
            #expect(error.offset == offset)
            #expect(error.message.contains("UTF-8"))
        }
        #expect((try? JSONSerialization.jsonObject(with: document, options: [.fragmentsAllowed])) == nil)
    }

    @Test("well-formed multi-byte UTF-8 at every length is accepted")
    func validUTF8() throws {
        let text = "é€😀\u{10FFFF}\u{FFFD}\u{7F}"
        #expect(try JSONParser.parse(Data("\"\(text)\"".utf8)) == .string(text))
        #expect(try JSONParser.parse(Data("\"\(text)\\n\(text)\"".utf8)) == .string("\(text)\n\(text)"))
    }
}
