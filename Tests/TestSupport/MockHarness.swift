public import APNsClient
public import APNsCore
public import Crypto
public import Essentials
public import Foundation
import Logging
public import MockAPNs
public import NIOCore
import NIOSSL
import Synchronization

/// Shared throwaway certificates (generating them costs a few milliseconds; sharing keeps tests quick).
public let authority = try! LocalCertificateAuthority()
public let signingKeyBytes = P256.Signing.PrivateKey().rawRepresentation
public var signingKey: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: signingKeyBytes) }
/// The signing key as a .p8 file holds it (PEM).
public var signingKeyPEM: String { signingKey.pemRepresentation }
public let token64 = String(repeating: "0f", count: 32)

/// Starts the real mock on 127.0.0.1:0 over HTTP/2 + TLS, runs `body` with its base URL and state, then stops it.
public func withMock<T: Sendable>(
    clientCA: Bool = false,
    clock: any WallClock = SystemWallClock(),
    behaviour: ConnectionBehaviour = ConnectionBehaviour(),
    teams: [MockTeam] = [],
    configure: (inout MockAPNsConfiguration) -> Void = { _ in },
    _ body: @Sendable (String, MockAPNsState) async throws -> T
) async throws -> T {
    var configuration = MockAPNsConfiguration(
        certificateChainPEM: authority.serverCertificatePEM, privateKeyPEM: authority.serverKeyPEM)
    configuration.port = 0
    configuration.tokenPublicKeyPEM = signingKey.publicKey.pemRepresentation
    configuration.expectedKeyID = "KEYID12345"
    configuration.expectedTeamID = "TEAMID6789"
    if clientCA { configuration.clientCAPEM = authority.caCertificatePEM }
    configuration.clock = clock
    configuration.teams = teams
    configure(&configuration)
    let state = MockAPNsState(behaviour: behaviour)
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    var logger = Logger(label: "mock-apns-test")
    logger.logLevel = .error
    let server = try MockAPNsServer(configuration, state: state, logger: logger)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            try await server.run { continuation.yield($0) }
            return nil
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CancellationError() }
        let result = try await body("https://127.0.0.1:\(port)", state)
        group.cancelAll()
        return result
    }
}

/// A sender with token auth that trusts the throwaway CA.
public func makeSender(
    _ base: String, key: P256.Signing.PrivateKey = signingKey, keyID: String = "KEYID12345",
    connections: Int = 1, eventLoops: Int = 0,
    retry: RetryPolicy = RetryPolicy(maxAttempts: 3, baseDelay: 0.05, maxDelay: 0.2),
    credentials: APNsCredentials? = nil, requestTimeout: TimeAmount = .seconds(10),
    pingInterval: TimeAmount = .seconds(60), pingTimeout: TimeAmount = .seconds(10), trustMock: Bool = true,
    connectTimeout: TimeAmount = .seconds(5)
) throws -> APNsSender {
    try APNsSender(
        configuration: APNsSenderConfiguration(
            environment: .custom(base),
            credentials: credentials ?? .token(APNsTokenManager(keyID: keyID, teamID: "TEAMID6789", key: key)),
            additionalTrustRootsPEM: trustMock ? authority.caCertificatePEM : nil, connections: connections,
            eventLoops: eventLoops, connectTimeout: connectTimeout, requestTimeout: requestTimeout,
            pingInterval: pingInterval,
            pingTimeout: pingTimeout, retry: retry))
}

public func push(
    token: String = token64, topic: String = "com.example.app", pushType: PushType = .alert,
    priority: APNsPriority? = .immediately, expiration: APNsExpiration? = nil, collapseID: String? = nil,
    apnsID: String? = nil,
    payload: [UInt8] = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
) -> APNsRequest {
    APNsRequest(
        deviceToken: token, topic: topic, pushType: pushType, priority: priority, expiration: expiration,
        collapseID: collapseID, apnsID: apnsID, payload: payload)
}

/// A valid JSON payload of exactly `size` bytes.
public func sizedPayload(_ size: Int) -> [UInt8] {
    let prefix = #"{"aps":{"alert":"hi"},"pad":""#
    let suffix = #""}"#
    return Array((prefix + String(repeating: "x", count: size - prefix.utf8.count - suffix.utf8.count) + suffix).utf8)
}

public func withSender<T: Sendable>(_ sender: APNsSender, _ body: (APNsSender) async throws -> T) async throws -> T {
    do {
        let result = try await body(sender)
        try await sender.shutdown()
        return result
    } catch {
        try? await sender.shutdown()
        throw error
    }
}

/// A clock the test moves by hand.
public final class ManualClock: WallClock {
    public init() {}
    private let offset = Synchronization.Mutex(0.0)
    public func now() -> Date { Date().addingTimeInterval(offset.withLock { $0 }) }
    public func advance(_ seconds: Double) { offset.withLock { $0 += seconds } }
}

/// The mock's signing key (.p8) and CA (PEM) written into `directory`, for a service or process that reads files.
public func writeMockCredentials(into directory: URL) throws -> (keyFile: String, caFile: String) {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let keyFile = directory.appendingPathComponent("AuthKey_KEYID12345.p8").path
    let caFile = directory.appendingPathComponent("ca.pem").path
    try signingKeyPEM.write(toFile: keyFile, atomically: true, encoding: .utf8)
    try authority.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
    return (keyFile, caFile)
}
