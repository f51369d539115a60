public import Essentials
public import FCMCore
import Foundation
import Logging
import MockAPNs
public import MockFCM
import _CryptoExtras

/// A throwaway RSA key for service accounts (made once per process: 2048-bit generation is slow in debug builds).
public let fcmKeyPEM: String = try! _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation

/// A service account for `project` whose token endpoint is `base` + `/token`.
public func fcmAccount(
    base: String, project: String = "demo-project", email: String = "push@demo-project.iam.gserviceaccount.com",
    keyPEM: String = fcmKeyPEM
) -> FCMServiceAccount {
    FCMServiceAccount(
        projectID: project, clientEmail: email, privateKey: Secret(keyPEM), privateKeyID: "key-1",
        tokenURI: base + "/token")
}

/// A registration token shaped like FCM's (152 URL-safe characters, an id, a colon, a key).
public func fcmToken(_ index: Int) -> String {
    let id = String(format: "d%010d", index)
    return id + ":APA91b" + String(repeating: "Hx_-", count: 35)
}

/// Starts the mock FCM on 127.0.0.1:0 over HTTP/2 + TLS with the accounts `accounts(base)` names (default: one
/// account of `fcmAccount`), runs `body` with its base URL and state, then stops it.
public func withMockFCM<T: Sendable>(
    clock: any WallClock = SystemWallClock(),
    accounts: @Sendable (String) -> [FCMServiceAccount] = { [fcmAccount(base: $0)] },
    configure: (inout MockFCMConfiguration) -> Void = { _ in },
    _ body: @Sendable (String, MockFCMState) async throws -> T
) async throws -> T {
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let state = MockFCMState()
    var logger = Logger(label: "mock-fcm-test")
    logger.logLevel = .error
    // The accounts name the mock's URL, known once it is bound: the server takes them by e-mail, so the list
    // is made with a placeholder base and fixed up after.
    let known = try accounts("https://127.0.0.1:0").map { try MockFCMAccount($0) }
    var configuration = MockFCMConfiguration(
        certificateChainPEM: authority.serverCertificatePEM, privateKeyPEM: authority.serverKeyPEM, accounts: known)
    configuration.port = 0
    configuration.clock = clock
    configure(&configuration)
    let server = try MockFCMServer(configuration, state: state, logger: logger)
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

/// The throwaway CA the local servers' certificates chain to (PEM), for clients that must trust them.
public var localCAPEM: String { authority.caCertificatePEM }
