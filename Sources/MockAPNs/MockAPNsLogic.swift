import APNsCore
import Crypto
import Essentials
import Foundation
import Synchronization

/// What the mock answers to one request: status, headers, optional body, and a delay before answering.
struct MockReply: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]?
    var delayMilliseconds: Int = 0
}

/// The mock's request handling, independent of the transport: APNs pushes and the control API.
struct MockAPNsLogic: Sendable {
    let configuration: MockAPNsConfiguration
    /// Raw bytes of the token-verification key (the CryptoKit key type is not Sendable).
    let publicKeyBytes: Data?
    let state: MockAPNsState
    let verifiedTokens = VerifiedTokens()

    init(configuration: MockAPNsConfiguration, state: MockAPNsState) throws {
        self.configuration = configuration
        self.state = state
        publicKeyBytes = try configuration.tokenPublicKeyPEM.map {
            try P256.Signing.PublicKey(pemRepresentation: $0).rawRepresentation
        }
    }

    /// Largest control request body (scripts for many tokens at once), bytes.
    static let controlBodyLimit = 1 << 20

    static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> MockReply {
        MockReply(
            status: status, headers: [("content-type", "application/json")] + headers, body: JSONWriter.bytes(value))
    }

    static func error(_ reason: APNsReason, apnsID: String, status: Int? = nil, timestamp: Int64? = nil) -> MockReply {
        var body: [String: JSONValue] = ["reason": .string(reason.rawValue)]
        if let timestamp { body["timestamp"] = .int(timestamp) }
        return json(status ?? reason.status, .object(body), headers: [("apns-id", apnsID)])
    }

    /// Answers one request. `headers` are lower-case names; `bodyTooLarge` means the body passed the voip limit.
    /// `certificateTopic`: the app the client certificate is for (certificate authentication), checked against
    /// `apns-topic` as APNs does.
    func respond(
        method: String, path: String, headers: [String: String], body: [UInt8], bodyTooLarge: Bool,
        certificateTopic: String? = nil
    ) -> MockReply {
        if path.hasPrefix("/control/") {
            guard !bodyTooLarge else {
                return Self.json(
                    413, .object(["error": .string("control bodies are limited to \(Self.controlBodyLimit) bytes")]))
            }
            return control(method: method, path: path, body: body)
        }
        let deviceToken: String
        if path == "/3/device" || path == "/3/device/" {
            deviceToken = ""
        } else if path.hasPrefix("/3/device/") {
            deviceToken = String(path.dropFirst("/3/device/".count))
        } else {
            return Self.error(.badPath, apnsID: UUID().uuidString.uppercased())
        }
        let givenID = headers["apns-id"]
        // Apple echoes a given apns-id exactly (clients match answers by it); otherwise it assigns an upper-case UUID.
        let apnsID = givenID.map(APNsValidator.isValidAPNsID) == true ? givenID! : UUID().uuidString.uppercased()
        let now = configuration.clock.now()
        let push = APNsWireRequest(
            deviceToken: deviceToken, topic: headers["apns-topic"], pushType: headers["apns-push-type"],
            priority: headers["apns-priority"], expiration: headers["apns-expiration"],
            collapseID: headers["apns-collapse-id"], apnsID: givenID, payload: body)
        func refuse(_ reason: APNsReason) -> MockReply {
            record(push, apnsID: apnsID, status: reason.status, reason: reason.rawValue, now: now)
            return Self.error(reason, apnsID: apnsID)
        }
        guard method == "POST" else { return refuse(.methodNotAllowed) }
        if bodyTooLarge { return refuse(.payloadTooLarge) }
        if configuration.clientCAPEM == nil {
            guard let authorization = headers["authorization"], authorization.lowercased().hasPrefix("bearer ") else {
                return refuse(.missingProviderToken)
            }
            if let violation = verify(token: String(authorization.dropFirst(7)), now: now) {
                return refuse(violation.reason)
            }
        }
        if configuration.clientCAPEM != nil, let certificateTopic, let topic = push.topic,
            topic != certificateTopic, !topic.hasPrefix(certificateTopic + ".")
        {
            // The certificate is for another app (APNs: 400 TopicDisallowed).
            return refuse(.topicDisallowed)
        }
        if let violation = APNsValidator.violation(of: push) { return refuse(violation.reason) }

        if let script = state.takeScript(for: deviceToken) {
            if script.status != 200 {
                let reason = APNsReason(rawValue: script.effectiveReason)
                let timestamp =
                    script.status == 410 ? (script.timestamp ?? Int64(now.timeIntervalSince1970 * 1000)) : nil
                record(push, apnsID: apnsID, status: script.status, reason: reason.rawValue, now: now)
                var reply = Self.error(reason, apnsID: apnsID, status: script.status, timestamp: timestamp)
                reply.delayMilliseconds = script.delayMilliseconds
                return reply
            }
            record(push, apnsID: apnsID, status: 200, reason: nil, now: now)
            return MockReply(
                status: 200, headers: [("apns-id", apnsID)], body: nil, delayMilliseconds: script.delayMilliseconds)
        }
        record(push, apnsID: apnsID, status: 200, reason: nil, now: now)
        return MockReply(status: 200, headers: [("apns-id", apnsID)], body: nil)
    }

    /// Checks a provider token; like APNs, a token string is verified once and afterwards only its age is checked.
    func verify(token: String, now: Date) -> APNsValidator.Violation? {
        guard let publicKeyBytes else { return nil }
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        if let issuedAt = verifiedTokens.issuedAt(token) {
            return Int128(nowSeconds) - Int128(issuedAt) > Int128(APNsJWT.maximumAge)
                ? APNsValidator.Violation(reason: .expiredProviderToken, message: "provider token older than an hour")
                : nil
        }
        guard let publicKey = try? P256.Signing.PublicKey(rawRepresentation: publicKeyBytes) else {
            return APNsValidator.Violation(reason: .internalServerError, message: "the configured key cannot be read")
        }
        do throws(APNsValidator.Violation) {
            let claims = try APNsJWT.verify(
                token, publicKey: publicKey, expectedKeyID: configuration.expectedKeyID,
                expectedTeamID: configuration.expectedTeamID, now: nowSeconds)
            verifiedTokens.remember(token, issuedAt: claims.issuedAt)
            return nil
        } catch {
            return error
        }
    }

    private func record(_ push: APNsWireRequest, apnsID: String, status: Int, reason: String?, now: Date) {
        state.record(
            ReceivedPush(
                request: push, apnsID: apnsID, status: status, reason: reason,
                receivedAt: now.timeIntervalSince1970))
    }

    /// The control API (not part of APNs): the record, failure scripts, connection behaviour and events.
    func control(method: String, path: String, body: [UInt8]) -> MockReply {
        func parsed(_ apply: (JSONValue) throws(MockConfigurationError) -> JSONValue) -> MockReply {
            let document: JSONValue
            do { document = try JSONParser.parse(body) } catch {
                return Self.json(400, .object(["error": .string("the body must be JSON: \(error)")]))
            }
            do { return Self.json(200, try apply(document)) } catch {
                return Self.json(400, .object(["error": .string(error.message)]))
            }
        }
        switch (method, path) {
        case ("GET", "/control/received"):
            return Self.json(
                200,
                .object(["count": .int(Int64(state.receivedCount)), "pushes": .array(state.receivedPushes.map(\.json))])
            )
        case ("DELETE", "/control/received"):
            state.clearReceived()
            return Self.json(200, .object(["cleared": .bool(true), "count": .int(0)]))
        case ("GET", "/control/scripts"):
            return Self.json(200, .object(state.allScripts.mapValues(\.json)))
        case ("POST", "/control/scripts"):
            return parsed { document throws(MockConfigurationError) in
                // One script `{"token": ..., "status": ...}`, or the --scripts file's shape `{"<token>": {...}}`.
                if let token = document["token"] {
                    guard let token = token.stringValue, APNsValidator.isValidDeviceToken(token) else {
                        throw MockConfigurationError("token must be a 64-hex device token")
                    }
                    var single = document
                    if case .object(var members) = single {
                        members.removeValue(forKey: "token")
                        single = .object(members)
                    }
                    state.script(try FailureScript(json: single), for: token)
                    return .object(["scripted": .array([.string(token)])])
                }
                try state.loadScripts(document)
                guard case .object(let entries) = document else { return .object([:]) }
                return .object(["scripted": .array(entries.keys.sorted().map(JSONValue.string))])
            }
        case ("DELETE", "/control/scripts"):
            state.clearScripts()
            return Self.json(200, .object(["cleared": .bool(true)]))
        case ("GET", "/control/behaviour"):
            return Self.json(200, state.behaviour.json)
        case ("POST", "/control/behaviour"):
            return parsed { document throws(MockConfigurationError) in
                let behaviour = try ConnectionBehaviour(json: document)
                state.behaviour = behaviour
                return behaviour.json
            }
        case ("DELETE", "/control/behaviour"):
            state.behaviour = ConnectionBehaviour()
            return Self.json(200, state.behaviour.json)
        case ("GET", "/control/connections"):
            return Self.json(200, state.connectionEvents.json)
        default:
            return Self.json(
                404,
                .object([
                    "error": .string(
                        "control endpoints: GET/DELETE /control/received, GET/POST/DELETE /control/scripts, "
                            + "GET/POST/DELETE /control/behaviour (applies to new connections), GET /control/connections"
                    )
                ]))
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
