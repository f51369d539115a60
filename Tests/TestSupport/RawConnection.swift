import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain TCP connection to 127.0.0.1 for tests that must send what no HTTP client would (trickled headers,
/// oversized header blocks, idle connections) and see exactly what comes back.
public final class RawConnection: @unchecked Sendable {
    private let descriptor: Int32

    /// Connects to 127.0.0.1:`port`; reads and sends give up after `readTimeout` seconds. `receiveBuffer` sets the socket's
    /// receive buffer (`SO_RCVBUF`, before connecting, so the kernel does not grow it): a client that reads slowly
    /// holds little, and the server's writes back up sooner.
    public init(port: Int, readTimeout: Double = 10, receiveBuffer: Int? = nil) throws {
        #if canImport(Glibc)
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw POSIXError(.ECONNREFUSED)
        }
        var timeout = timeval(tv_sec: Int(readTimeout), tv_usec: .init((readTimeout - Double(Int(readTimeout))) * 1e6))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // Sends give up after as long: a server that stops reading for good fails the test rather than hanging it.
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    /// Writes all of `bytes`; false when the peer has closed the connection.
    @discardableResult
    public func send(_ bytes: some Collection<UInt8>) -> Bool {
        let array = Array(bytes)
        var offset = 0
        while offset < array.count {
            let written = array[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads until the peer closes or the read timeout passes; returns what arrived and whether the peer closed.
    public func readUntilClosed() -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                received += buffer[0..<count]
                continue
            }
            return (received, count == 0 || errno == ECONNRESET)
        }
    }

    /// Reads one HTTP/1.1 response with a Content-Length body (the service always sends one).
    public func readResponse() -> (head: String, body: [UInt8])? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
                let length = Self.contentLength(head)
                if received.count - end.upperBound >= length {
                    return (head, Array(received[end.upperBound..<end.upperBound + length]))
                }
            }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { return nil }
            received += buffer[0..<count]
        }
    }
}

extension RawConnection {
    /// The Content-Length of a response's head (0 without one).
    public static func contentLength(_ head: String) -> Int {
        head.split(separator: "\r\n").compactMap { line -> Int? in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
            return Int(parts[1].trimmingCharacters(in: .whitespaces))
        }.first ?? 0
    }

    /// The bodies of the HTTP/1.1 responses one after another in `bytes` (each with a Content-Length), in order.
    public static func bodies(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var rest = bytes[...]
        var bodies: [ArraySlice<UInt8>] = []
        while let end = rest.firstRange(of: Array("\r\n\r\n".utf8)) {
            let head = String(decoding: rest[..<end.lowerBound], as: UTF8.self)
            let body = rest[end.upperBound...].prefix(contentLength(head))
            bodies.append(body)
            rest = rest[(end.upperBound + body.count)...]
        }
        return bodies
    }
}

/// Runs blocking work (socket reads) on a Dispatch thread, so it never holds one of the few cooperative threads
/// that the server under test needs.
public func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}
