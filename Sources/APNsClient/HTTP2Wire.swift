import APNsCore
import NIOCore
import NIOHTTP2

/// The parts of HTTP/2 (RFC 9113) a client of APNs speaks, written and read as bytes: frame headers, the frames it
/// sends, and the HPACK encoding of its requests. `APNsConnection` drives them.
enum HTTP2Wire {
    static let preface: StaticString = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    /// The largest frame payload anyone may send before SETTINGS_MAX_FRAME_SIZE says otherwise; we never raise ours.
    static let defaultMaxFrameSize = 16_384
    static let defaultWindow = 65_535
    static let maxWindow = Int(Int32.max)
    static let frameHeaderLength = 9

    enum FrameType: UInt8 {
        case data = 0x0
        case headers = 0x1
        case priority = 0x2
        case rstStream = 0x3
        case settings = 0x4
        case pushPromise = 0x5
        case ping = 0x6
        case goAway = 0x7
        case windowUpdate = 0x8
        case continuation = 0x9
    }

    enum Flag {
        static let endStream: UInt8 = 0x1
        static let ack: UInt8 = 0x1
        static let endHeaders: UInt8 = 0x4
        static let padded: UInt8 = 0x8
        static let priority: UInt8 = 0x20
    }

    enum Setting: UInt16 {
        case headerTableSize = 0x1
        case enablePush = 0x2
        case maxConcurrentStreams = 0x3
        case initialWindowSize = 0x4
        case maxFrameSize = 0x5
        case maxHeaderListSize = 0x6
    }

    /// A frame read off the wire: its header and its payload (padding still in).
    struct Frame {
        var type: UInt8
        var flags: UInt8
        var streamID: UInt32
        var payload: ByteBuffer

        func has(_ flag: UInt8) -> Bool { flags & flag != 0 }
    }

    /// A breach of the protocol by the server: the connection ends with GOAWAY carrying `code`.
    struct ConnectionError: Error, CustomStringConvertible {
        var code: HTTP2ErrorCode
        var detail: String
        var description: String { detail }

        static func protocolError(_ detail: String) -> Self { Self(code: .protocolError, detail: detail) }
        static func frameSize(_ detail: String) -> Self { Self(code: .frameSizeError, detail: detail) }
        static func flowControl(_ detail: String) -> Self { Self(code: .flowControlError, detail: detail) }
        static func compression(_ detail: String) -> Self { Self(code: .compressionError, detail: detail) }
    }

    /// Takes the next whole frame off `buffer`, or nil when its bytes have not all arrived. A frame longer than
    /// `maxFrameSize` (what we advertised) is a FRAME_SIZE_ERROR.
    static func readFrame(from buffer: inout ByteBuffer, maxFrameSize: Int) throws -> Frame? {
        guard buffer.readableBytes >= frameHeaderLength,
            let high = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
            let low = buffer.getInteger(at: buffer.readerIndex + 2, as: UInt8.self)
        else { return nil }
        let length = Int(high) << 8 | Int(low)
        guard length <= maxFrameSize else {
            throw ConnectionError.frameSize("a frame of \(length) bytes, above the \(maxFrameSize) allowed")
        }
        guard buffer.readableBytes >= frameHeaderLength + length else { return nil }
        buffer.moveReaderIndex(forwardBy: 3)
        let type = buffer.readInteger(as: UInt8.self)!
        let flags = buffer.readInteger(as: UInt8.self)!
        let streamID = buffer.readInteger(as: UInt32.self)! & 0x7fff_ffff
        let payload = buffer.readSlice(length: length)!
        return Frame(type: type, flags: flags, streamID: streamID, payload: payload)
    }

    /// Writes a frame header; the payload of `length` bytes follows.
    static func writeFrameHeader(
        into buffer: inout ByteBuffer, length: Int, type: FrameType, flags: UInt8 = 0, streamID: UInt32
    ) {
        buffer.writeInteger(UInt16(truncatingIfNeeded: length >> 8))
        buffer.writeInteger(UInt8(truncatingIfNeeded: length))
        buffer.writeInteger(type.rawValue)
        buffer.writeInteger(flags)
        buffer.writeInteger(streamID & 0x7fff_ffff)
    }

    /// Overwrites the length of the frame header written at `index`.
    static func setFrameLength(_ length: Int, at index: Int, in buffer: inout ByteBuffer) {
        buffer.setInteger(UInt16(truncatingIfNeeded: length >> 8), at: index)
        buffer.setInteger(UInt8(truncatingIfNeeded: length), at: index + 2)
    }

    static func writeSettings(into buffer: inout ByteBuffer, _ settings: [(Setting, UInt32)]) {
        writeFrameHeader(into: &buffer, length: settings.count * 6, type: .settings, streamID: 0)
        for (setting, value) in settings {
            buffer.writeInteger(setting.rawValue)
            buffer.writeInteger(value)
        }
    }

    static func writeSettingsAck(into buffer: inout ByteBuffer) {
        writeFrameHeader(into: &buffer, length: 0, type: .settings, flags: Flag.ack, streamID: 0)
    }

    static func writeWindowUpdate(into buffer: inout ByteBuffer, streamID: UInt32, increment: Int) {
        writeFrameHeader(into: &buffer, length: 4, type: .windowUpdate, streamID: streamID)
        buffer.writeInteger(UInt32(increment) & 0x7fff_ffff)
    }

    static func writeRSTStream(into buffer: inout ByteBuffer, streamID: UInt32, code: HTTP2ErrorCode) {
        writeFrameHeader(into: &buffer, length: 4, type: .rstStream, streamID: streamID)
        buffer.writeInteger(UInt32(code.networkCode))
    }

    static func writePing(into buffer: inout ByteBuffer, data: UInt64, ack: Bool) {
        writeFrameHeader(into: &buffer, length: 8, type: .ping, flags: ack ? Flag.ack : 0, streamID: 0)
        buffer.writeInteger(data)
    }

    static func writeGoAway(into buffer: inout ByteBuffer, lastStreamID: UInt32, code: HTTP2ErrorCode) {
        writeFrameHeader(into: &buffer, length: 8, type: .goAway, streamID: 0)
        buffer.writeInteger(lastStreamID & 0x7fff_ffff)
        buffer.writeInteger(UInt32(code.networkCode))
    }

    /// Strips the padding of a DATA or HEADERS payload (RFC 9113 6.1, 6.2); padding as long as the payload is a
    /// PROTOCOL_ERROR.
    static func unpadded(_ frame: Frame) throws -> ByteBuffer {
        var payload = frame.payload
        guard frame.has(Flag.padded) else { return payload }
        guard let padLength = payload.readInteger(as: UInt8.self), Int(padLength) <= payload.readableBytes else {
            throw ConnectionError.protocolError("padding longer than the frame")
        }
        return payload.readSlice(length: payload.readableBytes - Int(padLength))!
    }
}

/// HPACK (RFC 7541) for the requests this client writes.
///
/// Header values that repeat from push to push (`:authority`, `authorization`, `apns-topic`...) go into the dynamic
/// table once and are sent as one-byte indexes after; values unique to a push (`:path`, `apns-id`) are literals
/// that never enter the table, so they do not push the repeating ones out. Strings are sent as they are (no Huffman
/// coding, which RFC 7541 leaves to the encoder). The table never grows past 4,096 bytes, nor past the server's
/// SETTINGS_HEADER_TABLE_SIZE; a change of that size is signalled at the start of the next header block.
struct HPACKRequestEncoder {
    /// Our table's largest size, whatever the server allows (the default of RFC 9113).
    static let ownLimit = 4096

    private struct Entry: Hashable {
        var name: String
        var value: String
    }

    /// Each entry's absolute insertion number.
    private var numbers: [Entry: Int] = [:]
    /// Entries oldest first, with their sizes.
    private var entries = CircularBuffer<(Entry, Int)>(initialCapacity: 16)
    private var inserted = 0
    private var size = 0
    private(set) var capacity = HPACKRequestEncoder.ownLimit
    /// The last entry used for each repeating field of a request: a value the same as last time is found without
    /// hashing it (while its entry is still in the table).
    private var recent = [(value: String, number: Int)?](repeating: nil, count: RequestField.allCases.count)
    /// Table size updates owed at the start of the next block: the smallest since the last block, then the last.
    private var smallestPending: Int?
    private var finalPending: Int?

    /// Follows the server's SETTINGS_HEADER_TABLE_SIZE.
    mutating func peerTableSizeChanged(to value: Int) {
        let wanted = min(value, Self.ownLimit)
        guard wanted != (finalPending ?? capacity) else { return }
        smallestPending = min(smallestPending ?? wanted, wanted)
        finalPending = wanted
    }

    /// Starts a header block: any size update owed goes first (RFC 7541 4.2).
    mutating func beginBlock(into buffer: inout ByteBuffer) {
        guard let final = finalPending else { return }
        if let smallest = smallestPending, smallest < final {
            Self.writeInteger(smallest, prefix: 5, pattern: 0x20, into: &buffer)
            resize(to: smallest)
        }
        Self.writeInteger(final, prefix: 5, pattern: 0x20, into: &buffer)
        resize(to: final)
        smallestPending = nil
        finalPending = nil
    }

    /// The fields of a request whose values repeat from push to push, with their static-table name indexes.
    enum RequestField: Int, CaseIterable {
        case authority, authorization, topic, pushType, priority, expiration, contentType

        var name: String {
            switch self {
            case .authority: ":authority"
            case .authorization: "authorization"
            case .topic: "apns-topic"
            case .pushType: "apns-push-type"
            case .priority: "apns-priority"
            case .expiration: "apns-expiration"
            case .contentType: "content-type"
            }
        }

        var staticName: Int? {
            switch self {
            case .authority: 1
            case .authorization: 23
            case .contentType: 31
            default: nil
            }
        }
    }

    /// The header block of one push: the repeating fields from the table, the unique ones as literals.
    mutating func writeRequest(
        _ request: APNsRequest, authority: String, authorization: String?, into buffer: inout ByteBuffer
    ) {
        beginBlock(into: &buffer)
        Self.writePostHTTPS(into: &buffer)
        // Unique per token: a literal that never enters the table (it would push the repeating fields out).
        Self.writeDevicePath(token: request.deviceToken, into: &buffer)
        write(.authority, authority, into: &buffer)
        if let authorization { write(.authorization, authorization, into: &buffer) }
        if let topic = request.topic { write(.topic, topic, into: &buffer) }
        if let pushType = request.pushType { write(.pushType, pushType.rawValue, into: &buffer) }
        if let priority = request.priority { write(.priority, priority.headerValue, into: &buffer) }
        if let expiration = request.expiration { write(.expiration, expiration.headerValue, into: &buffer) }
        if let collapseID = request.collapseID {
            writeLiteral(name: "apns-collapse-id", staticName: nil, value: collapseID, into: &buffer)
        }
        if let apnsID = request.apnsID { writeLiteral(name: "apns-id", staticName: nil, value: apnsID, into: &buffer) }
        write(.contentType, "application/json", into: &buffer)
        Self.writeContentLength(request.payload.count, into: &buffer)
    }

    /// A repeating field of a request, through `recent` first.
    mutating func write(_ field: RequestField, _ value: String, into buffer: inout ByteBuffer) {
        if let (last, number) = recent[field.rawValue], number >= inserted - entries.count, last == value {
            writeIndexed(number, into: &buffer)
            return
        }
        recent[field.rawValue] = writeRepeating(
            name: field.name, staticName: field.staticName, value: value, into: &buffer
        ).map { (value, $0) }
    }

    /// `:method: POST` and `:scheme: https`, both whole entries of the static table.
    static func writePostHTTPS(into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(0x83))
        buffer.writeInteger(UInt8(0x87))
    }

    /// A field whose value repeats (indexed once seen). `staticName` is the name's index in the static table, if any.
    /// Returns the entry's insertion number, or nil when it is too large for the table (sent as a literal).
    @discardableResult
    mutating func writeRepeating(name: String, staticName: Int?, value: String, into buffer: inout ByteBuffer) -> Int? {
        let entry = Entry(name: name, value: value)
        if let number = numbers[entry] {
            writeIndexed(number, into: &buffer)
            return number
        }
        let entrySize = name.utf8.count + value.utf8.count + 32
        guard entrySize <= capacity else {
            writeLiteral(name: name, staticName: staticName, value: value, into: &buffer)
            return nil
        }
        Self.writeInteger(staticName ?? 0, prefix: 6, pattern: 0x40, into: &buffer)
        if staticName == nil { Self.writeString(name, into: &buffer) }
        Self.writeString(value, into: &buffer)
        numbers[entry] = inserted
        inserted += 1
        entries.append((entry, entrySize))
        size += entrySize
        evict()
        return inserted - 1
    }

    /// The entry inserted `number`-th, as an index: the dynamic table counts from 62, newest first.
    private func writeIndexed(_ number: Int, into buffer: inout ByteBuffer) {
        Self.writeInteger(62 + inserted - 1 - number, prefix: 7, pattern: 0x80, into: &buffer)
    }

    /// A field whose value is new each time: a literal that never enters the table.
    func writeLiteral(name: String, staticName: Int?, value: String, into buffer: inout ByteBuffer) {
        Self.writeInteger(staticName ?? 0, prefix: 4, pattern: 0x00, into: &buffer)
        if staticName == nil { Self.writeString(name, into: &buffer) }
        Self.writeString(value, into: &buffer)
    }

    /// `:path: /3/device/<token>` without building the string.
    static func writeDevicePath(token: String, into buffer: inout ByteBuffer) {
        writeInteger(4, prefix: 4, pattern: 0x00, into: &buffer)
        let prefix: StaticString = "/3/device/"
        writeInteger(prefix.utf8CodeUnitCount + token.utf8.count, prefix: 7, pattern: 0x00, into: &buffer)
        buffer.writeStaticString(prefix)
        buffer.writeString(token)
    }

    /// `content-length` as a literal (static name 28); its digits fit a small string, so no allocation.
    static func writeContentLength(_ length: Int, into buffer: inout ByteBuffer) {
        writeInteger(28, prefix: 4, pattern: 0x00, into: &buffer)
        writeString(String(length), into: &buffer)
    }

    private mutating func resize(to newCapacity: Int) {
        capacity = newCapacity
        evict()
    }

    private mutating func evict() {
        while size > capacity, let (entry, entrySize) = entries.popFirst() {
            size -= entrySize
            numbers.removeValue(forKey: entry)
        }
    }

    /// RFC 7541 5.1: an integer in a prefix of `prefix` bits, the byte's other bits set from `pattern`.
    static func writeInteger(_ value: Int, prefix: Int, pattern: UInt8, into buffer: inout ByteBuffer) {
        let limit = (1 << prefix) - 1
        guard value >= limit else {
            buffer.writeInteger(pattern | UInt8(value))
            return
        }
        buffer.writeInteger(pattern | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            buffer.writeInteger(UInt8(rest & 0x7f) | 0x80)
            rest >>= 7
        }
        buffer.writeInteger(UInt8(rest))
    }

    /// RFC 7541 5.2, without Huffman coding.
    static func writeString(_ string: String, into buffer: inout ByteBuffer) {
        writeInteger(string.utf8.count, prefix: 7, pattern: 0x00, into: &buffer)
        buffer.writeString(string)
    }
}
