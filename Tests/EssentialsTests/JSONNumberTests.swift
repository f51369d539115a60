import Essentials
import Foundation
import TestSupport
import Testing

/// The parser reads most numbers without making a string of them (integers digit by digit, decimals by Clinger's
/// exact fast path); these tests hold it to what reading the text through `Int64` and `strtod` gives.
@Suite("JSON numbers: the parser's fast paths against strtod")
struct JSONNumberTests {
    /// What a number's text means, read independently: `Int64` for an integer that fits, else `strtod` (through
    /// `Double(_:)`), an integral value within ±2^53 as `.int`; nil when it is out of range.
    static func reference(_ text: String) -> JSONValue? {
        let isInteger = !text.contains { ".eE".contains($0) }
        if isInteger, let value = Int64(text) { return .int(value) }
        guard let double = Double(text), double.isFinite else { return nil }
        if double == double.rounded(), abs(double) <= 9_007_199_254_740_992 { return .int(Int64(double)) }
        return .double(double)
    }

    /// The same value, a double to the bit (so -0.0 and 0.0, or two neighbours, are told apart).
    static func same(_ parsed: JSONValue?, _ expected: JSONValue?) -> Bool {
        switch (parsed, expected) {
        case (.double(let a), .double(let b)): a.bitPattern == b.bitPattern
        default: parsed == expected
        }
    }

    static func parse(_ text: String) -> JSONValue? {
        guard case .array(let items) = try? JSONValue.decode(Data("[\(text)]".utf8)), items.count == 1 else {
            return nil
        }
        return items[0]
    }

    @Test("200,000 generated numbers read as Int64 and strtod read them")
    func generated() {
        var generator = SeededGenerator(seed: 49)
        var mismatches: [String] = []
        let digits = Array("0123456789")
        func run(_ count: Int) -> String {
            var text = String(digits[Int.random(in: 1...9, using: &generator)])
            for _ in 1..<count { text.append(digits[Int.random(in: 0...9, using: &generator)]) }
            return text
        }
        for _ in 0..<200_000 {
            var text = Bool.random(using: &generator) ? "-" : ""
            // Integer part: 0, or 1-21 digits (past 19 the fast path gives way).
            text += Int.random(in: 0..<8, using: &generator) == 0 ? "0" : run(Int.random(in: 1...21, using: &generator))
            if Int.random(in: 0..<4, using: &generator) > 0 {
                // A fraction, leading zeros sometimes, up to 21 digits in all.
                text += "." + String(repeating: "0", count: Int.random(in: 0...3, using: &generator))
                text += run(Int.random(in: 1...18, using: &generator))
            }
            if Int.random(in: 0..<3, using: &generator) == 0 {
                text += ["e", "E", "e+", "e-", "E-"][Int.random(in: 0..<5, using: &generator)]
                text += String(Int.random(in: 0...40, using: &generator))
            }
            let parsed = Self.parse(text)
            if !Self.same(parsed, Self.reference(text)) { mismatches.append(text) }
        }
        #expect(mismatches.isEmpty, "first mismatches: \(mismatches.prefix(5))")
    }

    @Test(
        "numbers at the fast paths' edges",
        arguments: [
            "0", "-0", "-0.0", "0.0", "9007199254740992", "9007199254740993", "9007199254740992.5", "-9007199254740993",
            "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
            "9999999999999999999", "10000000000000000000", "18446744073709551615", "18446744073709551616",
            "1e22", "1e23", "1.5e22", "123e-22", "123e-23", "4.9e-324", "2.2250738585072014e-308",
            "1.7976931348623157e308",
            "0.1", "0.2", "0.30000000000000004", "48.80100", "2.30100", "1699999990.25", "0.000000000000000000001",
            "1234567890123456789e-5", "12345678901234567890e-5", "9007199254740993e-1", "1e0", "1E+2", "0.1e-2",
            "100e-2", "2e-1", "-2.5e-3",
        ])
    func edges(_ text: String) {
        #expect(Self.same(Self.parse(text), Self.reference(text)), "\(text)")
    }

    @Test("out-of-range numbers are refused as before", arguments: ["1e309", "-1e400", "1e100000000"])
    func outOfRange(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.decode(Data(text.utf8)) }
        #expect(Self.reference(text) == nil)
    }

    @Test("a fraction's leading zeros do not bring an exponent too long to read back within the fast path")
    func longExponent() {
        // 0.000…01e1000000 with 99,999 zeros is 10^900,000: out of range, however the exponent is read.
        for digits in ["1", "15"] {
            let text = "0." + String(repeating: "0", count: 99_999) + digits + "e1000000"
            #expect(throws: JSONParseError.self) { try JSONValue.decode(Data(text.utf8)) }
            #expect(Self.reference(text) == nil)
        }
    }
}
