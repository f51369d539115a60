import Essentials
import Foundation
import TestSupport
import Testing

@Suite("JSON parser and writer")
struct JSONCodecTests {
    func parse(_ text: String) throws -> JSONValue { try JSONParser.parse(Data(text.utf8)) }

    @Test("scalars, nesting, escapes and surrogate pairs")
    func parsesValues() throws {
        let value = try parse(#" {"a": [1, -2.5, true, false, null], "s": "q\"\\\/\n\u00e9\ud83d\ude00", "o": {}} "#)
        #expect(value["a"] == .array([.int(1), .double(-2.5), .bool(true), .bool(false), .null]))
        #expect(value["s"] == .string("q\"\\/\né😀"))
        #expect(value["o"] == .object([:]))
    }

    @Test("integer semantics: integral numbers are integers, others doubles")
    func numbers() throws {
        #expect(try parse("1589288354") == .int(1_589_288_354))
        #expect(try parse("1589288354.0") == .int(1_589_288_354))
        #expect(try parse("1e3") == .int(1000))
        #expect(try parse("1589288354.5") == .double(1_589_288_354.5))
        #expect(try parse("-0.001") == .double(-0.001))
        #expect(try parse("9223372036854775807") == .int(Int64.max))
    }

    @Test(
        "invalid documents are refused with an offset",
        arguments: [
            "", "{", "[1,]", "{\"a\":}", "01", "1.", "-", "\"abc", "tru", "{\"a\" 1}", "[1 2]", "\"\\x\"",
            "\"\\ud800\"",
            "nul", "{} x", "\"a\u{01}\"", "1e400",
        ])
    func invalid(text: String) {
        #expect(throws: JSONParseError.self) { try parse(text) }
    }

    @Test("nesting beyond the limit is refused, not a crash")
    func depth() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError.self) { try parse(deep) }
        let ok =
            String(repeating: "[", count: JSONParser.maximumDepth)
            + String(repeating: "]", count: JSONParser.maximumDepth)
        #expect(throws: Never.self) { try parse(ok) }
    }

    @Test("writer: sorted keys, escapes, unescaped slashes and non-ASCII")
    func writer() {
        let value = JSONValue.object([
            "b": .string("a/b é \"q\" \u{1}\n"), "a": .array([.int(-3), .double(0.5), .null, .bool(true)]),
        ])
        #expect(
            String(decoding: JSONWriter.bytes(value), as: UTF8.self)
                == #"{"a":[-3,0.5,null,true],"b":"a/b é \"q\" \u0001\n"}"#)
    }

    @Test("random documents agree with Foundation's JSONSerialization and round-trip")
    func randomAgainstFoundation() throws {
        var generator = SeededGenerator(seed: 2024)
        for _ in 0..<300 {
            let value = randomJSON(depth: 0, generator: &generator)
            let bytes = JSONWriter.bytes(value)
            // Foundation must accept what we write, and read back the same structure.
            let foundation = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
            let reencoded = try JSONSerialization.data(withJSONObject: foundation, options: [.fragmentsAllowed])
            #expect(try JSONParser.parse(reencoded) == value)
            #expect(try JSONParser.parse(Data(bytes)) == value)
        }
    }

    /// RFC 8259's escaping, one byte at a time, as the writer did before it scanned eight bytes at a time.
    func referenceEscaped(_ string: String) -> [UInt8] {
        var out: [UInt8] = [0x22]
        for byte in string.utf8 {
            switch byte {
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0x0A: out += Array(#"\n"#.utf8)
            case 0x0D: out += Array(#"\r"#.utf8)
            case 0x09: out += Array(#"\t"#.utf8)
            case 0x08: out += Array(#"\b"#.utf8)
            case 0x0C: out += Array(#"\f"#.utf8)
            case 0..<0x20: out += Array(String(format: "\\u%04x", Int(byte)).utf8)
            default: out.append(byte)
            }
        }
        return out + [0x22]
    }

    @Test("strings: every byte that needs an escape, at every position of a long run, and random long strings")
    func escapesInLongStrings() throws {
        let specials = (0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) } + ["\"", "\\", "é", "😀", "\u{7F}"]
        for special in specials {
            for position in 0..<26 {
                var characters = Array(repeating: Character("a"), count: 25)
                characters.insert(special, at: position)
                let string = String(characters)
                var written: [UInt8] = []
                JSONWriter.writeString(string, into: &written)
                #expect(written == referenceEscaped(string), "\(special.unicodeScalars.first!.value) at \(position)")
            }
        }
        var generator = SeededGenerator(seed: 49)
        let pool = Array("abcdefgh é😀\"\\/\n\t\u{1}\u{1F}\u{7F}z ")
        for _ in 0..<2_000 {
            let string = String(
                (0..<Int.random(in: 0..<70, using: &generator)).map { _ in pool.randomElement(using: &generator)! })
            var written: [UInt8] = []
            JSONWriter.writeString(string, into: &written)
            #expect(written == referenceEscaped(string))
            let read = try JSONSerialization.jsonObject(with: Data(written), options: [.fragmentsAllowed]) as? String
            #expect(read == string)
        }
    }

    func randomJSON(depth: Int, generator: inout SeededGenerator) -> JSONValue {
        let choice = Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &generator)
        switch choice {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .int(Int64.random(in: -1_000_000_000_000...1_000_000_000_000, using: &generator))
        case 3: return .double(Double(Int.random(in: -100_000...100_000, using: &generator)) + 0.25)
        case 4:
            let pool = Array("ab é😀\"\\/\n\t\u{2}z")
            return .string(
                String(
                    (0..<Int.random(in: 0..<8, using: &generator)).map { _ in pool.randomElement(using: &generator)! }))
        case 5:
            return .array(
                (0..<Int.random(in: 0..<4, using: &generator)).map { _ in
                    randomJSON(depth: depth + 1, generator: &generator)
                })
        default:
            var members: [String: JSONValue] = [:]
            for i in 0..<Int.random(in: 0..<4, using: &generator) {
                members["k\(i)é"] = randomJSON(depth: depth + 1, generator: &generator)
            }
            return .object(members)
        }
    }

    @Test(
        "a key twice in one object is refused by default, at any depth and in a streamed object; lastWins keeps the last"
    )
    func duplicateKeys() throws {
        for text in [#"{"a":1,"a":2}"#, #"{"x":{"b":[],"b":[]}}"#, #"[{"k":1,"j":2,"k":3}]"#] {
            #expect(throws: JSONParseError.self, "\(text)") { try JSONParser.parse(Array(text.utf8)) }
        }
        #expect(try JSONParser.parse(Array(#"{"a":1,"b":{"a":2}}"#.utf8))["b"]?["a"] == .int(2))
        let lenient = try JSONParser.parse(Array(#"{"a":1,"a":2}"#.utf8), duplicateKeys: .lastWins)
        #expect(lenient["a"] == .int(2))
        for text in [#"{"items":[1],"items":[2]}"#, #"{"n":1,"items":[],"n":2}"#] {
            #expect(throws: JSONParseError.self, "\(text)") {
                _ = try JSONParser.parseObject(Array(text.utf8), streaming: "items") { _, _ in true }
            }
        }
    }

    @Test("duplicates are found in objects of every size, before the second value is read; nesting keeps them apart")
    func duplicateKeysAtEverySize() throws {
        for count in [2, 15, 16, 17, 40] {
            let keys = (0..<count).map { "k\($0)" }
            let members = keys.enumerated().map { #""\#($1)":\#($0)"# }
            for twin in [0, count / 2, count - 1] {
                // The repeated key is followed by a value that is not JSON: the duplicate is what is reported, at
                // the offset after its colon.
                let head = "{" + members.joined(separator: ",") + #","\#(keys[twin])":"#
                let text = head + "nonsense}"
                do {
                    _ = try JSONParser.parse(Array(text.utf8))
                    Issue.record("accepted \(text)")
                } catch {
                    #expect(error.message.contains("'\(keys[twin])' appears twice"), "\(error.message)")
                    #expect(error.offset == head.utf8.count)
                }
                let lenient = try JSONParser.parse(Array((head + "true}").utf8), duplicateKeys: .lastWins)
                guard case .object(let object) = lenient else {
                    Issue.record("not an object: \(lenient)")
                    continue
                }
                #expect(object.count == count)
                #expect(object[keys[twin]] == .bool(true))
                #expect(object[keys[(twin + 1) % count]] == .int(Int64((twin + 1) % count)))
            }
            // The same keys one level down are another object's: no duplicate.
            let nested = "{" + members.joined(separator: ",") + #","inner":{"# + members.joined(separator: ",") + "}}"
            let parsed = try JSONParser.parse(Array(nested.utf8))
            #expect(parsed["inner"]?[keys[count - 1]] == .int(Int64(count - 1)))
            #expect(parsed[keys[0]] == .int(0))
        }
    }
}
