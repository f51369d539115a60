// JSONParser's scalars: strings (escapes, surrogate pairs, UTF-8 validation) and numbers, and its error type.
extension JSONParser {
    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes.
        var sawNonASCII = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                if sawNonASCII, let bad = UTF8Validation.firstInvalidOffset(in: raw) {
                    throw JSONParseError(offset: start + bad, message: "invalid UTF-8 in a string")
                }
                index += 1
                return String(decoding: raw, as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("unescaped control character in a string") }
            if byte >= 0x80 { sawNonASCII = true }
            index += 1
        }
        // Raw (unescaped) bytes are checked in place, so an error gives the offset of the offending byte.
        if sawNonASCII,
            let bad = UTF8Validation.firstInvalidOffset(in: UnsafeBufferPointer(rebasing: bytes[start..<index]))
        {
            throw JSONParseError(offset: start + bad, message: "invalid UTF-8 in a string")
        }
        var runStart = index
        var runHasNonASCII = false
        var buffer = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                if runHasNonASCII,
                    let bad = UTF8Validation.firstInvalidOffset(
                        in: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                {
                    throw JSONParseError(offset: runStart + bad, message: "invalid UTF-8 in a string")
                }
                runHasNonASCII = false
            }
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: buffer, as: UTF8.self)
            case UInt8(ascii: "\\"):
                defer { runStart = index }
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): buffer.append(0x22)
                case UInt8(ascii: "\\"): buffer.append(0x5C)
                case UInt8(ascii: "/"): buffer.append(0x2F)
                case UInt8(ascii: "b"): buffer.append(0x08)
                case UInt8(ascii: "f"): buffer.append(0x0C)
                case UInt8(ascii: "n"): buffer.append(0x0A)
                case UInt8(ascii: "r"): buffer.append(0x0D)
                case UInt8(ascii: "t"): buffer.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate must be followed by \u and a low surrogate.
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else {
                            throw error("unpaired UTF-16 surrogate in \\u escape")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("invalid UTF-16 surrogate pair") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw error("unpaired UTF-16 surrogate in \\u escape")
                    }
                    buffer.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
                default: throw error("invalid escape '\\\(Character(Unicode.Scalar(escape)))'")
                }
            default:
                if byte < 0x20 { throw error("unescaped control character in a string") }
                if byte >= 0x80 { runHasNonASCII = true }
                buffer.append(byte)
                index += 1
            }
        }
        throw error("unterminated string")
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("incomplete \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        let negative = bytes[index] == UInt8(ascii: "-")
        var isInteger = true
        // The digits as they are read (integer part and fraction, up to 19 significant ones), and the power of ten
        // the fraction and exponent give them: what the exact fast paths below need, without making a string.
        var significand: UInt64 = 0
        var significant = 0
        var scale = 0
        var exponentCut = false
        func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        func take(_ byte: UInt8) {
            if significand != 0 || byte != UInt8(ascii: "0") { significant += 1 }
            if significant <= 19, !exponentCut { significand = significand &* 10 &+ UInt64(byte &- UInt8(ascii: "0")) }
        }
        if negative { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) {
                throw error("leading zeros are not allowed in numbers")
            }
        } else {
            while index < bytes.count, isDigit(bytes[index]) {
                take(bytes[index])
                index += 1
            }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else {
                throw error("a decimal point must be followed by digits")
            }
            while index < bytes.count, isDigit(bytes[index]) {
                take(bytes[index])
                scale -= 1
                index += 1
            }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            var exponentNegative = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                exponentNegative = bytes[index] == UInt8(ascii: "-")
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else {
                throw error("an exponent must have digits")
            }
            var exponent = 0
            while index < bytes.count, isDigit(bytes[index]) {
                if exponent < 100_000 {
                    exponent = exponent * 10 + Int(bytes[index] - UInt8(ascii: "0"))
                } else {
                    // An exponent this long is not read to its end: the fast paths must not apply (a fraction's
                    // leading zeros could bring the scale back within them); the text says the rest.
                    exponentCut = true
                }
                index += 1
            }
            scale += exponentNegative ? -exponent : exponent
        }
        if significant <= 19, !exponentCut {
            if isInteger {
                if !negative, significand <= UInt64(Int64.max) { return .int(Int64(significand)) }
                if negative, significand <= UInt64(Int64.max) + 1 {
                    return .int(Int64(truncatingIfNeeded: 0 &- significand))
                }
            } else if significand <= 1 << 53, (-22...22).contains(scale) {
                // Clinger's fast path: the significand and the power of ten are both exact doubles, so one division
                // or multiplication rounds once, correctly: the same double strtod gives for the text.
                var double = Double(significand)
                double = scale < 0 ? double / Self.powersOfTen[-scale] : double * Self.powersOfTen[scale]
                if negative { double = -double }
                return Self.number(double)
            }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let value = Int64(text) { return .int(value) }
        guard let double = Double(text), double.isFinite else { throw error("number out of range") }
        return Self.number(double)
    }

    /// A number read with a fraction or an exponent: an integral value within ±2^53 is an `.int`, as `NSNumber`
    /// bridging makes it on iOS.
    private static func number(_ double: Double) -> JSONValue {
        if double == double.rounded(), abs(double) <= 9_007_199_254_740_992 { return .int(Int64(double)) }
        return .double(double)
    }

    /// 10^0 through 10^22: the powers of ten a double holds exactly.
    private static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
        1e20, 1e21, 1e22,
    ]
}

/// UTF-8 well-formedness as RFC 3629 defines it: no overlong forms, no surrogates, nothing above U+10FFFF.
enum UTF8Validation {
    /// The offset of the first byte that starts an ill-formed sequence, or nil when all of `bytes` is valid.
    static func firstInvalidOffset(in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var index = 0
        let count = bytes.count
        while index < count {
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            let length: Int
            var lower: UInt8 = 0x80
            var upper: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0:
                length = 3
                lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED:
                length = 3
                upper = 0x9F
            case 0xF0:
                length = 4
                lower = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4:
                length = 4
                upper = 0x8F
            default: return index
            }
            guard index + length <= count else { return index }
            let second = bytes[index + 1]
            guard second >= lower, second <= upper else { return index }
            for offset in 2..<max(2, length) where bytes[index + offset] & 0xC0 != 0x80 { return index }
            index += length
        }
        return nil
    }
}

/// Why a document is not valid JSON, with the byte offset.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var offset: Int
    public var message: String
    public var description: String { "\(message) at byte \(offset)" }
}
