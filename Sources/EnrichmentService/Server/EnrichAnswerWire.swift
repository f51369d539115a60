import HTTPTypes
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An enrichment answered on the event loop, as NIO's HTTP/1 response head: what the route's response (`200`,
/// `Content-Type`, `Content-Length`, `Date`, `Server`) becomes through `HTTP1ToHTTPServerCodec`, made directly.
/// `EnrichOnEventLoop` writes it, with the body and the end, from the codec's context: the answer skips the HTTP
/// types and their conversion, and still goes through `HTTPResponseEncoder`, which frames every response of the
/// connection (it pairs each with its request's method, as the request decoder records them).
/// `EnrichOnEventLoopTests` checks the encoder's bytes for both against each other.
struct EnrichAnswerWire: Sendable {
    /// The `Server` header's value as the route's `HTTPFields` would hold it (made legal the same way), if any.
    let serverName: String?

    init(serverName: String?) {
        self.serverName = serverName.map { HTTPField(name: .server, value: $0).value }
    }

    /// The head of the answer carrying `length` bytes of JSON, dated `date`.
    func head(length: Int, date: String) -> HTTPResponseHead {
        var headers: [(String, String)] = [
            ("Content-Type", "application/json; charset=utf-8"), ("Content-Length", String(length)), ("Date", date),
        ]
        if let serverName { headers.append(("Server", serverName)) }
        return HTTPResponseHead(version: .http1_1, status: .ok, headers: HTTPHeaders(headers))
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
