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
    /// The keys tokens are verified with: the single configured key first (with its optional key and team id),
    /// then every team's.
    let tokenKeys: [TokenKey]
    let state: MockAPNsState
    let verifiedTokens = VerifiedTokens()

    /// A key provider tokens may be signed with.
    struct TokenKey: Sendable {
        /// Nil: any `kid` (the single key configured without `expectedKeyID`).
        var keyID: String?
        var teamID: String?
        /// Raw bytes of the public key (the CryptoKit key type is not Sendable).
        var publicKey: Data
        /// The bundle ids a token signed with it may push to; nil: any.
        var bundleIDs: Set<String>?
    }

    init(configuration: MockAPNsConfiguration, state: MockAPNsState) throws {
        self.configuration = configuration
        self.state = state
        var keys: [TokenKey] = []
        if let pem = configuration.tokenPublicKeyPEM {
            keys.append(
                TokenKey(
                    keyID: configuration.expectedKeyID, teamID: configuration.expectedTeamID,
                    publicKey: try P256.Signing.PublicKey(pemRepresentation: pem).rawRepresentation, bundleIDs: nil))
        }
        for team in configuration.teams {
            for (keyID, pem) in team.keys.sorted(by: { $0.key < $1.key }) {
                keys.append(
                    TokenKey(
                        keyID: keyID, teamID: team.teamID,
                        publicKey: try P256.Signing.PublicKey(pemRepresentation: pem).rawRepresentation,
                        bundleIDs: team.bundleIDs.isEmpty ? nil : team.bundleIDs))
            }
        }
        tokenKeys = keys
    }

    /// The bundle id of a topic: the topic without a push type's suffix.
    static func bundleID(ofTopic topic: String) -> String {
        for type in PushType.allCases where !type.topicSuffix.isEmpty && topic.hasSuffix(type.topicSuffix) {
            return String(topic.dropLast(type.topicSuffix.count))
        }
        return topic
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
    ///
    /// `connection`: the connection's provider team, set by its first verified token. APNs's token-based
    /// connection page: "APNs doesn't support authentication tokens from multiple developer accounts over a single
    /// connection": a token of another team on it gets 403 InvalidProviderToken.
    func respond(
        method: String, path: String, headers: [String: String], body: [UInt8], bodyTooLarge: Bool,
        certificateTopic: String? = nil, connection: ConnectionTeam? = nil
    ) -> MockReply {
        if path.hasPrefix("/control/") {
            guard !bodyTooLarge else {
                return Self.json(
                    413, .object(["error": .string("control bodies are limited to \(Self.controlBodyLimit) bytes")]))
            }
            return control(method: method, path: path, body: body)
        }
        if path.hasPrefix("/1/") || path.hasPrefix("/4/") {
            // Channel management and broadcasts authenticate as pushes do; the caller may use its own apps only.
            var allowed: Set<String>? = nil
            if let certificateTopic {
                allowed = [certificateTopic]
            } else if configuration.clientCAPEM == nil {
                let requestID = headers["apns-request-id"] ?? UUID().uuidString.lowercased()
                guard let authorization = headers["authorization"], authorization.lowercased().hasPrefix("bearer ")
                else {
                    return Self.json(
                        403, .object(["reason": .string(APNsReason.missingProviderToken.rawValue)]),
                        headers: [("apns-request-id", requestID)])
                }
                switch verify(token: String(authorization.dropFirst(7)), now: configuration.clock.now()) {
                case .failure(let violation):
                    return Self.json(
                        violation.reason.status, .object(["reason": .string(violation.reason.rawValue)]),
                        headers: [("apns-request-id", requestID)])
                case .success(let key):
                    guard connection?.admits(team: key?.teamID) ?? true else {
                        return Self.json(
                            403, .object(["reason": .string(APNsReason.invalidProviderToken.rawValue)]),
                            headers: [("apns-request-id", requestID)])
                    }
                    allowed = key?.bundleIDs
                }
            }
            return broadcastAPI(
                method: method, path: path, headers: headers, body: body, bodyTooLarge: bodyTooLarge,
                allowedBundles: allowed)
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
        var provider: TokenKey?
        func refuse(_ reason: APNsReason) -> MockReply {
            record(push, apnsID: apnsID, status: reason.status, reason: reason.rawValue, now: now, provider: provider)
            return Self.error(reason, apnsID: apnsID)
        }
        guard method == "POST" else { return refuse(.methodNotAllowed) }
        if bodyTooLarge { return refuse(.payloadTooLarge) }
        if configuration.clientCAPEM == nil {
            guard let authorization = headers["authorization"], authorization.lowercased().hasPrefix("bearer ") else {
                return refuse(.missingProviderToken)
            }
            switch verify(token: String(authorization.dropFirst(7)), now: now) {
            case .failure(let violation): return refuse(violation.reason)
            case .success(let key):
                provider = key
                // One connection, one developer account.
                guard connection?.admits(team: key?.teamID) ?? true else { return refuse(.invalidProviderToken) }
                // A team's key pushes to its own apps only.
                if let bundles = key?.bundleIDs, let topic = push.topic,
                    !bundles.contains(Self.bundleID(ofTopic: topic))
                {
                    return refuse(.topicDisallowed)
                }
            }
        }
        if certificateTopic != nil, push.pushType == PushType.liveactivity.rawValue {
            // Live Activity pushes need token authentication: a push certificate lists the app's topics for
            // alert, voip and complication pushes, never `.push-type.liveactivity`, and APNs refuses a topic
            // its certificate does not list.
            return refuse(.topicDisallowed)
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
                record(
                    push, apnsID: apnsID, status: script.status, reason: reason.rawValue, now: now, provider: provider)
                var reply = Self.error(reason, apnsID: apnsID, status: script.status, timestamp: timestamp)
                reply.delayMilliseconds = script.delayMilliseconds
                return reply
            }
            record(push, apnsID: apnsID, status: 200, reason: nil, now: now, provider: provider)
            return MockReply(
                status: 200, headers: [("apns-id", apnsID)], body: nil, delayMilliseconds: script.delayMilliseconds)
        }
        record(push, apnsID: apnsID, status: 200, reason: nil, now: now, provider: provider)
        return MockReply(status: 200, headers: [("apns-id", apnsID)], body: nil)
    }

    /// Checks a provider token; like APNs, a token string is verified once and afterwards only its age is checked.
    /// Succeeds with the bundle ids the token's key may push to (nil: any).
    func verify(token: String, now: Date) -> Result<TokenKey?, APNsValidator.Violation> {
        guard !tokenKeys.isEmpty else { return .success(nil) }
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        if let known = verifiedTokens.lookup(token) {
            return Int128(nowSeconds) - Int128(known.issuedAt) > Int128(APNsJWT.maximumAge)
                ? .failure(
                    APNsValidator.Violation(reason: .expiredProviderToken, message: "provider token older than an hour")
                )
                : .success(known.verified)
        }
        // The key the token names; otherwise the first, whose checks then say what is wrong (signature, kid).
        let keyID = APNsJWT.unverifiedKeyID(token)
        let index = tokenKeys.firstIndex { $0.keyID != nil && $0.keyID == keyID } ?? 0
        let tokenKey = tokenKeys[index]
        guard let publicKey = try? P256.Signing.PublicKey(rawRepresentation: tokenKey.publicKey) else {
            return .failure(.init(reason: .internalServerError, message: "the configured key cannot be read"))
        }
        do throws(APNsValidator.Violation) {
            let claims = try APNsJWT.verify(
                token, publicKey: publicKey, expectedKeyID: tokenKey.keyID, expectedTeamID: tokenKey.teamID,
                now: nowSeconds)
            var verified = tokenKey
            // The single key configured without ids verifies any kid and iss: record the ones the token named.
            verified.keyID = claims.keyID
            verified.teamID = claims.teamID
            verifiedTokens.remember(token, issuedAt: claims.issuedAt, verified: verified)
            return .success(verified)
        } catch {
            return .failure(error)
        }
    }

    private func record(
        _ push: APNsWireRequest, apnsID: String, status: Int, reason: String?, now: Date, provider: TokenKey? = nil
    ) {
        var received = ReceivedPush(
            request: push, apnsID: apnsID, status: status, reason: reason, receivedAt: now.timeIntervalSince1970)
        received.providerKeyID = provider?.keyID
        received.providerTeamID = provider?.teamID
        state.record(received)
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
        case ("GET", "/control/channels"):
            return Self.json(
                200,
                .object([
                    "channels": .array(
                        state.broadcastChannels.map {
                            .object([
                                "channel_id": .string($0.id), "bundle_id": .string($0.bundleID),
                                "message_storage_policy": .int(Int64($0.messageStoragePolicy)),
                            ])
                        })
                ]))
        case ("GET", "/control/broadcasts"):
            let broadcasts = state.receivedBroadcasts
            return Self.json(
                200, .object(["count": .int(Int64(broadcasts.count)), "broadcasts": .array(broadcasts.map(\.json))]))
        case ("DELETE", "/control/channels"):
            state.channels.clear()
            return Self.json(200, .object(["cleared": .bool(true)]))
        default:
            return Self.json(
                404,
                .object([
                    "error": .string(
                        "control endpoints: GET/DELETE /control/received, GET/POST/DELETE /control/scripts, "
                            + "GET/POST/DELETE /control/behaviour (applies to new connections), GET /control/connections, "
                            + "GET/DELETE /control/channels (channels and broadcasts), GET /control/broadcasts"
                    )
                ]))
        }
    }
}

/// Provider tokens whose signature already verified, with their `iat` and the key that verified them (bounded;
/// cleared when full).
final class VerifiedTokens: Sendable {
    struct Known: Sendable {
        var issuedAt: Int64
        /// The key that verified it, with the token's own kid and iss.
        var verified: MockAPNsLogic.TokenKey
    }
    private let tokens = Mutex<[String: Known]>([:])

    func lookup(_ token: String) -> Known? { tokens.withLock { $0[token] } }

    func remember(_ token: String, issuedAt: Int64, verified: MockAPNsLogic.TokenKey) {
        tokens.withLock { tokens in
            if tokens.count >= 1024 { tokens.removeAll() }
            tokens[token] = Known(issuedAt: issuedAt, verified: verified)
        }
    }
}

/// The developer account (team) a connection authenticated as, by its first verified provider token. Used on the
/// connection's event loop only.
final class ConnectionTeam: @unchecked Sendable {
    private var team: String?

    /// Whether a token of `team` may be used on this connection: the first verified one names the connection's
    /// team; later ones must be of the same. A token whose team is not known (a mock configured without team ids
    /// and a token without `iss`) neither names nor breaks it.
    func admits(team candidate: String?) -> Bool {
        guard let candidate else { return true }
        guard let team else {
            team = candidate
            return true
        }
        return team == candidate
    }
}
