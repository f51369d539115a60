import APNsCore
import Crypto
import EnrichmentCore
import Foundation
import Hummingbird
import HummingbirdHTTP2
import HTTPTypes
import Logging
import NIOSSL
import Synchronization

/// How the mock APNs server runs.
public struct MockAPNsConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port.
    public var port = 2197
    /// Server certificate chain and key (PEM). See `LocalCertificateAuthority` for a throwaway pair.
    public var certificateChainPEM: String
    public var privateKeyPEM: String
    /// Public key (PEM) that provider tokens must verify with. Nil: a bearer token must be present but is not
    /// verified (a warning is logged at start).
    public var tokenPublicKeyPEM: String?
    /// When set, `kid` must equal it (else 403 UnrelatedKeyIdInToken).
    public var expectedKeyID: String?
    /// When set, `iss` must equal it.
    public var expectedTeamID: String?
    /// When set, clients must present a certificate signed by this CA (certificate auth); tokens are then optional.
    public var clientCAPEM: String?
    public var clock: any WallClock = SystemWallClock()

    public init(certificateChainPEM: String, privateKeyPEM: String) {
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
    }
}

/// A local APNs-compatible server over HTTP/2 + TLS that validates like Apple and answers with Apple's statuses.
///
/// Push: `POST /3/device/<token>`. Control (same server, not part of APNs): `GET /control/received`,
/// `DELETE /control/received`, `POST /control/scripts` (`{"token", "status", "reason"?, "times"?, "delay_ms"?,
/// "timestamp"?}`), `DELETE /control/scripts`.
public enum MockAPNsServer {
    /// Builds the server; `onRunning` receives the bound port.
    public static func build(
        _ configuration: MockAPNsConfiguration,
        state: MockAPNsState,
        logger: Logger = Logger(label: "mock-apns"),
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> some ApplicationProtocol {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(configuration.certificateChainPEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(configuration.privateKeyPEM.utf8), format: .pem)))
        if let clientCA = configuration.clientCAPEM {
            tls.certificateVerification = .noHostnameVerification
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(clientCA.utf8)))
        }
        let publicKey = try configuration.tokenPublicKeyPEM.map { try P256.Signing.PublicKey(pemRepresentation: $0) }
        if publicKey == nil, configuration.clientCAPEM == nil {
            logger.warning("no token public key configured: provider tokens are required but their signatures are not checked")
        }
        let handler = PushHandler(configuration: configuration, publicKeyBytes: publicKey?.rawRepresentation, state: state)

        let router = Router()
        router.post("/3/device/:token") { request, context in try await handler.handle(request, context: context) }
        router.post("/3/device") { _, _ in PushHandler.error(.missingDeviceToken, apnsID: UUID().uuidString) }
        for method: HTTPRequest.Method in [.get, .put, .delete, .patch] {
            router.on("/3/device/:token", method: method) { _, _ in PushHandler.error(.methodNotAllowed, apnsID: UUID().uuidString) }
        }
        ControlRoutes(state: state).register(on: router)
        return Application(
            router: router,
            server: try .http2Upgrade(tlsConfiguration: tls),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "mock-apns"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? configuration.port) },
            logger: logger)
    }
}

/// Validates and answers one push.
struct PushHandler: Sendable {
    let configuration: MockAPNsConfiguration
    /// Raw bytes of the token-verification key (the CryptoKit key type is not Sendable).
    let publicKeyBytes: Data?
    let state: MockAPNsState
    let verifiedTokens = VerifiedTokens()

    static func header(_ request: Request, _ name: String) -> String? {
        HTTPField.Name(name).flatMap { request.headers[$0] }
    }

    static func error(_ reason: APNsReason, apnsID: String, timestamp: Int64? = nil) -> Response {
        var body: [String: JSONValue] = ["reason": .string(reason.rawValue)]
        if let timestamp { body["timestamp"] = .int(timestamp) }
        return Response(
            status: .init(code: reason.status),
            headers: [.contentType: "application/json", HTTPField.Name("apns-id")!: apnsID],
            body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(.object(body)))))
    }

    func handle(_ request: Request, context: some RequestContext) async throws -> Response {
        let token = context.parameters.get("token") ?? ""
        let givenID = Self.header(request, "apns-id")
        // Apple echoes a given apns-id exactly (clients match answers by it); otherwise it assigns an upper-case UUID.
        let apnsID = givenID.map(APNsValidator.isValidAPNsID) == true ? givenID! : UUID().uuidString.uppercased()
        let now = configuration.clock.now()

        // Body first, bounded: anything past the voip limit is too large whatever the headers say.
        let body: [UInt8]
        do {
            let buffer = try await request.body.collect(upTo: PushType.voip.maximumPayloadSize)
            body = Array(buffer.readableBytesView)
        } catch {
            return finish(token: token, request: request, apnsID: apnsID, payload: [], reason: .payloadTooLarge, now: now)
        }

        if configuration.clientCAPEM == nil {
            guard let authorization = Self.header(request, "authorization"), authorization.lowercased().hasPrefix("bearer ") else {
                return finish(token: token, request: request, apnsID: apnsID, payload: body, reason: .missingProviderToken, now: now)
            }
            if let publicKeyBytes {
                let jwt = String(authorization.dropFirst(7))
                let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
                do throws(APNsValidator.Violation) {
                    // Like APNs, a token string is verified once and then only its age is checked.
                    if let issuedAt = verifiedTokens.issuedAt(jwt) {
                        if nowSeconds - issuedAt > APNsJWT.maximumAge {
                            throw APNsValidator.Violation(reason: .expiredProviderToken, message: "provider token older than an hour")
                        }
                    } else {
                        guard let publicKey = try? P256.Signing.PublicKey(rawRepresentation: publicKeyBytes) else {
                            throw APNsValidator.Violation(reason: .internalServerError, message: "bad configured key")
                        }
                        let claims = try APNsJWT.verify(jwt, publicKey: publicKey, expectedKeyID: configuration.expectedKeyID,
                                                        expectedTeamID: configuration.expectedTeamID, now: nowSeconds)
                        verifiedTokens.remember(jwt, issuedAt: claims.issuedAt)
                    }
                } catch {
                    return finish(token: token, request: request, apnsID: apnsID, payload: body, reason: error.reason, now: now)
                }
            }
        }

        let push = APNsRequest(
            deviceToken: token, topic: Self.header(request, "apns-topic"), pushType: Self.header(request, "apns-push-type"),
            priority: Self.header(request, "apns-priority").map { Int($0) ?? -1 },
            expiration: Self.header(request, "apns-expiration"), collapseID: Self.header(request, "apns-collapse-id"),
            apnsID: givenID, payload: body)
        if let violation = APNsValidator.violation(of: push) {
            return finish(token: token, request: request, apnsID: apnsID, payload: body, reason: violation.reason, now: now)
        }

        if let script = state.takeScript(for: token) {
            if script.delayMilliseconds > 0 { try await Task.sleep(for: .milliseconds(script.delayMilliseconds)) }
            if script.status != 200 {
                let reason = APNsReason(rawValue: script.effectiveReason)
                let timestamp = script.status == 410 ? (script.timestamp ?? Int64(now.timeIntervalSince1970 * 1000)) : nil
                record(push, apnsID: apnsID, status: script.status, reason: reason.rawValue, now: now)
                var response = Self.error(reason, apnsID: apnsID, timestamp: timestamp)
                response.status = .init(code: script.status)
                return response
            }
        }
        record(push, apnsID: apnsID, status: 200, reason: nil, now: now)
        return Response(status: .ok, headers: [HTTPField.Name("apns-id")!: apnsID])
    }

    private func finish(token: String, request: Request, apnsID: String, payload: [UInt8], reason: APNsReason, now: Date) -> Response {
        let push = APNsRequest(deviceToken: token, topic: Self.header(request, "apns-topic"),
                               pushType: Self.header(request, "apns-push-type"),
                               priority: Self.header(request, "apns-priority").flatMap { Int($0) }, payload: payload)
        record(push, apnsID: apnsID, status: reason.status, reason: reason.rawValue, now: now)
        return Self.error(reason, apnsID: apnsID)
    }

    private func record(_ push: APNsRequest, apnsID: String, status: Int, reason: String?, now: Date) {
        state.record(ReceivedPush(
            deviceToken: push.deviceToken, topic: push.topic, pushType: push.pushType, priority: push.priority,
            expiration: push.expiration, collapseID: push.collapseID, apnsID: apnsID, payload: push.payload,
            status: status, reason: reason, receivedAt: now.timeIntervalSince1970))
    }
}

/// The mock's control API (scripts and the record of received pushes).
struct ControlRoutes: Sendable {
    let state: MockAPNsState

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"],
                 body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(value))))
    }

    func register(on router: Router<BasicRequestContext>) {
        router.get("/control/received") { _, _ in
            Self.json(.object(["count": .int(Int64(state.receivedCount)), "pushes": .array(state.receivedPushes.map(\.json))]))
        }
        router.delete("/control/received") { _, _ in
            state.clearReceived()
            return Self.json(.object(["cleared": .bool(true)]))
        }
        router.post("/control/scripts") { request, _ in
            let buffer = try await request.body.collect(upTo: 1 << 20)
            do {
                let document = try JSONParser.parse(Array(buffer.readableBytesView))
                guard let token = document["token"]?.stringValue, APNsValidator.isValidDeviceToken(token) else {
                    throw MockConfigurationError("token must be a 64-hex device token")
                }
                state.script(try FailureScript(json: document), for: token)
                return Self.json(.object(["scripted": .string(token)]))
            } catch let error as MockConfigurationError {
                return Self.json(.object(["error": .string(error.message)]), status: .badRequest)
            } catch {
                return Self.json(.object(["error": .string("body must be JSON: \(error)")]), status: .badRequest)
            }
        }
        router.delete("/control/scripts") { _, _ in
            state.clearScripts()
            return Self.json(.object(["cleared": .bool(true)]))
        }
    }
}

/// Provider tokens whose signature already verified, with their `iat` (bounded; cleared when full).
final class VerifiedTokens: Sendable {
    private let tokens = Mutex<[String: Int64]>([:])

    func issuedAt(_ token: String) -> Int64? { tokens.withLock { $0[token] } }

    func remember(_ token: String, issuedAt: Int64) {
        tokens.withLock { tokens in
            if tokens.count >= 1024 { tokens.removeAll() }
            tokens[token] = issuedAt
        }
    }
}
