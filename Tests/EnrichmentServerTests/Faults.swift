import Foundation
import TestSupport

/// Loopback ports for the fault tests.
enum LoopbackPort {
    /// A free TCP port on 127.0.0.1.
    static func free() throws -> Int {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: bound.sin_port))
    }

    /// True when something listens on `port`.
    static func accepts(_ port: Int) -> Bool {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Waits (up to `seconds`) until `port` accepts.
    static func waitUntilListening(_ port: Int, seconds: Double) {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline, !accepts(port) { Thread.sleep(forTimeInterval: 0.05) }
    }
}

/// The test cluster reached through a TCP forwarder (`scripts/delay-proxy.py` with no delay) that a test cuts and
/// starts again: the node then sees exactly a database that went away (connections cut, new ones refused).
final class ForwardedPostgres: @unchecked Sendable {
    /// The URL a node is given: the forwarder's port in place of the cluster's.
    let url: String
    let port: Int
    private let target: Int
    private let lock = NSLock()
    private var process: Process?

    /// Not forwarding yet: call `start()`.
    init() async throws {
        var components = try require(URLComponents(string: try await PostgresTestDatabase.makeURL()))
        target = try require(components.port)
        port = try LoopbackPort.free()
        components.port = port
        url = try require(components.string)
    }

    /// Starts forwarding and waits until the port accepts.
    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "scripts/delay-proxy.py", "\(port)", "\(target)", "0"]
        process.standardOutput = FileHandle.nullDevice
        // Not the test's own stderr: a child left holding it would keep `swift test` waiting.
        process.standardError = FileHandle.nullDevice
        try process.run()
        lock.withLock { self.process = process }
        LoopbackPort.waitUntilListening(port, seconds: 10)
    }

    /// The database gone: the forwarder killed with SIGKILL.
    func cut() {
        guard let process = lock.withLock({ self.process }) else { return }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        lock.withLock { self.process = nil }
    }

    deinit { cut() }
}

private func require<T>(_ value: T?) throws -> T {
    guard let value else { throw TestEnvironmentError("the test database URL has no port") }
    return value
}
