public import Foundation
import MockAPNs
import NIOCore
import NIOPosix

/// A TCP port on 127.0.0.1 that was free a moment ago (for servers that cannot report a port-0 binding).
public func freePort() async throws -> Int {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(host: "127.0.0.1", port: 0).get()
    let port = channel.localAddress?.port ?? 0
    try await channel.close()
    return port
}

/// Debian's nginx configured as an APNs-like HTTP/2 + TLS endpoint (`scripts/nginx-apns.conf.template`): a
/// header-only 200 echoing `apns-id` for every push. A server nobody here wrote, to test the sender against.
public struct NginxAPNs: Sendable {
    public let base: String
    let process: Process
    let directory: URL

    /// Starts nginx on a free port with the throwaway server certificate; `keepaliveRequests` is how many requests
    /// a connection takes before nginx sends GOAWAY.
    public static func start(keepaliveRequests: Int, template: String = "nginx-apns.conf.template") async throws
        -> NginxAPNs
    {
        let binary = try installedServer("nginx", package: "nginx-light")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-apns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try writeServerCertificate(into: directory)
        let template = try String(
            contentsOf: repositoryRoot.appendingPathComponent("scripts/" + template), encoding: .utf8)
        var lastError = ""
        for _ in 0..<5 {
            let port = try await freePort()
            let conf =
                template
                .replacingOccurrences(of: "@DIR@", with: directory.path)
                .replacingOccurrences(of: "@PORT@", with: String(port))
                .replacingOccurrences(of: "@CERT@", with: directory.appendingPathComponent("server.pem").path)
                .replacingOccurrences(of: "@KEY@", with: directory.appendingPathComponent("server-key.pem").path)
                .replacingOccurrences(of: "@KEEPALIVE@", with: String(keepaliveRequests))
            let confURL = directory.appendingPathComponent("nginx.conf")
            try Data(conf.utf8).write(to: confURL)
            let arguments = ["-p", directory.path, "-c", confURL.path, "-e", directory.path + "/error.log"]
            if let process = try await startListening(binary, arguments, port: port) {
                return NginxAPNs(base: "https://127.0.0.1:\(port)", process: process, directory: directory)
            }
            lastError =
                (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        }
        throw TestEnvironmentError("nginx did not start: \(lastError)")
    }

    public func stop() { stopServer(process, removing: directory) }
}

/// Runs `body` against nginx as an FCM-like endpoint (`scripts/nginx-fcm.conf.template`), then stops it.
public func withNginxFCM<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
    let nginx = try await NginxAPNs.start(keepaliveRequests: 1000, template: "nginx-fcm.conf.template")
    defer { nginx.stop() }
    return try await body(nginx.base)
}

/// The path of a Debian server binary (`/usr/sbin` or `/usr/bin`), or an error saying how to install it.
func installedServer(_ name: String, package: String) throws -> String {
    guard let path = ["/usr/sbin/\(name)", "/usr/bin/\(name)"].first(where: FileManager.default.isExecutableFile)
    else {
        throw TestEnvironmentError(
            "\(name) is not installed: run scripts/install-test-tools.sh (it installs Debian's \(package))")
    }
    return path
}

/// The throwaway CA's server certificate and key, as `server.pem` and `server-key.pem` in `directory`.
func writeServerCertificate(into directory: URL) throws {
    try Data(authority.serverCertificatePEM.utf8).write(to: directory.appendingPathComponent("server.pem"))
    try Data(authority.serverKeyPEM.utf8).write(to: directory.appendingPathComponent("server-key.pem"))
}

/// Kills a throwaway test server (nginx in single-process mode does not always end on SIGTERM) and removes its
/// folder.
func stopServer(_ process: Process, removing directory: URL) {
    if process.isRunning {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
    try? FileManager.default.removeItem(at: directory)
}

/// Starts a server process told to listen on `port`; returns it once it accepts connections, or nil when it ended
/// first (a lost race for the port: the caller tries another) or never listened (killed).
func startListening(_ binary: String, _ arguments: [String], port: Int) async throws -> Process? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    for _ in 0..<100 {
        if !process.isRunning { return nil }
        if (try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port).get().close().get()) != nil
        {
            return process
        }
        try await Task.sleep(for: .milliseconds(50))
    }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    return nil
}

/// Runs `body` against nginx as an APNs-like endpoint, then stops it.
public func withNginxAPNs<T: Sendable>(keepaliveRequests: Int, _ body: (String) async throws -> T) async throws -> T {
    let nginx = try await NginxAPNs.start(keepaliveRequests: keepaliveRequests)
    defer { nginx.stop() }
    return try await body(nginx.base)
}

/// The machine lacks something a test needs; the message says how to get it.
public struct TestEnvironmentError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The repository's root folder (for scripts and sample files).
public let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// nghttp2's own server (Debian's `nghttpd`) serving a file for each device path, so that a push to a token in
/// `tokens` is answered 200 with the file as its body. `options` are nghttpd's: padding, HPACK table sizes,
/// windows, trailers, stream limits. A second HTTP/2 implementation nobody here wrote.
public struct Nghttpd: Sendable {
    public let base: String
    let process: Process
    let directory: URL

    public static func start(tokens: [String], bodySize: Int = 0, options: [String]) async throws -> Nghttpd {
        let binary = try installedServer("nghttpd", package: "nghttp2-server")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nghttpd-\(UUID().uuidString)")
        let devices = directory.appendingPathComponent("docroot/3/device")
        try FileManager.default.createDirectory(at: devices, withIntermediateDirectories: true)
        let body = Data(repeating: UInt8(ascii: "x"), count: bodySize)
        for token in tokens { try body.write(to: devices.appendingPathComponent(token)) }
        try writeServerCertificate(into: directory)
        for _ in 0..<5 {
            let port = try await freePort()
            let arguments =
                ["-d", directory.appendingPathComponent("docroot").path] + options + [
                    String(port), directory.appendingPathComponent("server-key.pem").path,
                    directory.appendingPathComponent("server.pem").path,
                ]
            if let process = try await startListening(binary, arguments, port: port) {
                return Nghttpd(base: "https://127.0.0.1:\(port)", process: process, directory: directory)
            }
        }
        try? FileManager.default.removeItem(at: directory)
        throw TestEnvironmentError("nghttpd did not start with options \(options)")
    }

    public func stop() { stopServer(process, removing: directory) }
}

/// Runs `body` against nghttpd started with `options`, then stops it.
public func withNghttpd<T: Sendable>(
    tokens: [String], bodySize: Int = 0, options: [String], _ body: (String) async throws -> T
) async throws -> T {
    let server = try await Nghttpd.start(tokens: tokens, bodySize: bodySize, options: options)
    defer { server.stop() }
    return try await body(server.base)
}
