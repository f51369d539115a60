import HTTPTypes
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An enrichment answered on the event loop as HTTP/1.1 bytes: the head that the route's response
/// (`200`, `Content-Type`, `Content-Length`, `Date`, `Server`) becomes through `HTTP1ToHTTPServerCodec` and
/// `HTTPResponseEncoder`, then the body, in one buffer. Writing it below the encoder saves the response's trip through
/// the HTTP types, the codec and the encoder (three parts, each converted and re-encoded) for the same bytes;
/// `EnrichOnEventLoopTests` checks them against the encoder's own.
struct EnrichAnswerWire: Sendable {
    /// The status line and the headers before the length.
    let prefix: [UInt8]
    /// The `Server` header's line (with its CRLF), or nothing.
    let serverLine: [UInt8]

    init(serverName: String?) {
        prefix = Array(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ".utf8)
        // The value as the route's `HTTPFields` would hold it (a configured name is made legal the same way).
        serverLine = serverName.map { Array("\r\nServer: \(HTTPField(name: .server, value: $0).value)".utf8) } ?? []
    }

    /// The response carrying `json`, dated `date`.
    func response(json: [UInt8], date: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: prefix.count + serverLine.count + date.utf8.count + json.count + 40)
        buffer.writeBytes(prefix)
        buffer.writeString(String(json.count))
        buffer.writeStaticString("\r\nDate: ")
        buffer.writeString(date)
        buffer.writeBytes(serverLine)
        buffer.writeStaticString("\r\n\r\n")
        buffer.writeBytes(json)
        return buffer
    }
}

/// The `Date` header's value (RFC 9110's IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), made once a second.
struct HTTPDateCache {
    private var second = Int.min
    private var value = ""

    mutating func now() -> String {
        let now = Int(time(nil))
        if now != second {
            second = now
            value = Self.format(epochSeconds: now)
        }
        return value
    }

    static func format(epochSeconds: Int) -> String {
        var seconds = time_t(epochSeconds)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
