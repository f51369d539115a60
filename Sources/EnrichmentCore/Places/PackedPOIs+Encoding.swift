import Essentials
import Foundation

/// The byte format of a packed record (see `PackedPOIs`): reading its fields in order, and writing the doubles,
/// varints, strings and lists it is made of.
extension PackedPOIs {

    struct Reader {
        let bytes: [UInt8]
        var at: Int

        mutating func string() -> String {
            let length = PackedPOIs.readVarint(bytes, &at)
            defer { at += length }
            return String(decoding: bytes[at..<(at + length)], as: UTF8.self)
        }

        mutating func optional() -> String? {
            let marker = PackedPOIs.readVarint(bytes, &at)
            guard marker > 0 else { return nil }
            defer { at += marker - 1 }
            return String(decoding: bytes[at..<(at + marker - 1)], as: UTF8.self)
        }

        mutating func list() -> [String] {
            let count = PackedPOIs.readVarint(bytes, &at)
            return (0..<count).map { _ in string() }
        }

        /// Skips `fields` fields in record order (store id, name, city, zipcode, country, lines, types, tags,
        /// contact).
        mutating func skip(_ fields: Int) {
            for field in 0..<fields {
                switch field {
                case 0, 1: at += PackedPOIs.readVarint(bytes, &at)
                case 2, 3, 4, 8: at += max(0, PackedPOIs.readVarint(bytes, &at) - 1)
                default:
                    let count = PackedPOIs.readVarint(bytes, &at)
                    for _ in 0..<count { at += PackedPOIs.readVarint(bytes, &at) }
                }
            }
        }
    }

    static func writeDouble(_ value: Double, _ out: inout [UInt8]) {
        var bits = value.bitPattern.littleEndian
        withUnsafeBytes(of: &bits) { out.append(contentsOf: $0) }
    }

    static func readDouble(_ bytes: [UInt8], _ at: Int) -> Double {
        var bits: UInt64 = 0
        for k in 0..<8 { bits |= UInt64(bytes[at + k]) << (8 * UInt64(k)) }
        return Double(bitPattern: UInt64(littleEndian: bits))
    }

    static func writeVarint(_ value: Int, _ out: inout [UInt8]) {
        var value = UInt(value)
        while value >= 0x80 {
            out.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }

    /// A varint at `at` of a record's bytes (the arena, or a pointer to it), `at` moved past it.
    @inline(__always)
    static func readVarint<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, _ at: inout Int) -> Int
    where Bytes.Index == Int {
        var value = 0
        var shift = 0
        while true {
            let byte = bytes[at]
            at += 1
            value |= Int(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
    }

    static func writeString(_ text: String, _ out: inout [UInt8]) {
        var text = text
        text.withUTF8 { writeBytes($0, &out) }
    }

    static func writeOptional(_ text: String?, _ out: inout [UInt8]) {
        guard var text else { return out.append(0) }
        text.withUTF8 { writeOptionalBytes($0, &out) }
    }

    static func writeBytes(_ text: UnsafeBufferPointer<UInt8>, _ out: inout [UInt8]) {
        writeVarint(text.count, &out)
        out.append(contentsOf: text)
    }

    /// A stored column's text as it is read: written as it is when it is valid UTF-8 (nearly always: the service
    /// writes only `String`s), else as `String(decoding:)` repairs it, so that the answer, written from these bytes,
    /// is valid JSON as a decoded POI's would be.
    static func writeText(_ text: UnsafeBufferPointer<UInt8>, _ out: inout [UInt8]) {
        if isValidUTF8(text) {
            writeBytes(text, &out)
        } else {
            writeString(String(decoding: text, as: UTF8.self), &out)
        }
    }

    static func writeOptionalText(_ text: UnsafeBufferPointer<UInt8>?, _ out: inout [UInt8]) {
        guard let text else { return out.append(0) }
        if isValidUTF8(text) {
            writeOptionalBytes(text, &out)
        } else {
            writeOptional(String(decoding: text, as: UTF8.self), &out)
        }
    }

    /// Whether `bytes` are valid UTF-8: ASCII eight bytes at a time, the rest through the standard library.
    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        while i + 8 <= bytes.count {
            let word = UnsafeRawPointer(bytes.baseAddress! + i).loadUnaligned(as: UInt64.self)
            if word & 0x8080_8080_8080_8080 != 0 { break }
            i += 8
        }
        while i < bytes.count, bytes[i] < 0x80 { i += 1 }
        if i == bytes.count { return true }
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    static func writeOptionalBytes(_ text: UnsafeBufferPointer<UInt8>?, _ out: inout [UInt8]) {
        guard let text else { return out.append(0) }
        writeVarint(text.count + 1, &out)
        out.append(contentsOf: text)
    }

    /// A stored JSON array of strings as a list: plain strings (no escapes) are split in place; anything else is
    /// parsed as JSON, keeping the strings, as `StoredPOI.strings` does.
    static func writeJSONList(_ json: UnsafeBufferPointer<UInt8>?, _ out: inout [UInt8]) {
        guard let json else { return out.append(0) }
        var items: [Range<Int>] = []
        var i = 0
        func skipSpace() {
            while i < json.count, json[i] == 0x20 || json[i] == 0x0A || json[i] == 0x09 || json[i] == 0x0D { i += 1 }
        }
        var plain = false
        skipSpace()
        if i < json.count, json[i] == UInt8(ascii: "[") {
            i += 1
            skipSpace()
            if i < json.count, json[i] == UInt8(ascii: "]") {
                plain = true
            } else {
                while i < json.count, json[i] == UInt8(ascii: "\"") {
                    let start = i + 1
                    var end = start
                    while end < json.count, json[end] != UInt8(ascii: "\""), json[end] != UInt8(ascii: "\\") {
                        end += 1
                    }
                    guard end < json.count, json[end] == UInt8(ascii: "\"") else { break }
                    items.append(start..<end)
                    i = end + 1
                    skipSpace()
                    if i < json.count, json[i] == UInt8(ascii: ",") {
                        i += 1
                        skipSpace()
                        continue
                    }
                    plain = i < json.count && json[i] == UInt8(ascii: "]")
                    break
                }
            }
        }
        if plain {
            writeVarint(items.count, &out)
            for range in items { writeText(UnsafeBufferPointer(rebasing: json[range]), &out) }
            return
        }
        let strings: [String]
        if case .array(let values)? = try? JSONParser.parse(Array(json)) {
            strings = values.compactMap(\.stringValue)
        } else {
            strings = []
        }
        writeList(strings, &out)
    }

    static func writeList(_ items: [String], _ out: inout [UInt8]) {
        writeVarint(items.count, &out)
        for item in items { writeString(item, &out) }
    }

    /// FNV-1a over the id's bytes (stable, cheap for short ids).
    static func hash(_ key: UnsafeBufferPointer<UInt8>) -> Int {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(truncatingIfNeeded: h ^ (h >> 29))
    }
}
