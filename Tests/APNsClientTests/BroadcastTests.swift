import APNsClient
import APNsCore
import Crypto
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Broadcast channels (iOS 18) through `APNsBroadcastClient` against the mock over HTTP/2 + TLS, and the mock's
/// answers to requests our client never writes (sent by curl).
@Suite("Broadcast channels and broadcasts against the mock")
struct BroadcastTests {
    func client(
        _ base: String, key: P256.Signing.PrivateKey = signingKey, keyID: String = "KEYID12345",
        teamID: String = "TEAMID6789"
    ) throws -> APNsBroadcastClient {
        try APNsBroadcastClient(
            hosts: .custom(base),
            credentials: .token(APNsTokenManager(keyID: keyID, teamID: teamID, key: key)),
            additionalTrustRootsPEM: authority.caCertificatePEM)
    }

    func refusal(_ body: () async throws -> some Any) async -> APNsBroadcastError? {
        do {
            _ = try await body()
            return nil
        } catch let error as APNsBroadcastError {
            return error
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test("create, read, list, broadcast, delete: Apple's statuses, headers and bodies")
    func lifecycle() async throws {
        try await withMock { base, state in
            let apns = try client(base)
            defer { Task { try? await apns.shutdown() } }
            let stored = try await apns.createChannel(
                bundleID: "com.example.app", policy: .mostRecentMessageStored,
                requestID: "4c5f7e3a-0000-4000-8000-000000000001")
            #expect(stored.requestID == "4c5f7e3a-0000-4000-8000-000000000001")
            #expect(Data(base64Encoded: stored.channelID) != nil)
            let live = try await apns.createChannel(bundleID: "com.example.app", policy: .noMessageStored)
            #expect(live.channelID != stored.channelID)
            #expect(
                try await apns.readChannel(bundleID: "com.example.app", channelID: stored.channelID)
                    == .mostRecentMessageStored)
            #expect(
                try await apns.readChannel(bundleID: "com.example.app", channelID: live.channelID) == .noMessageStored)
            #expect(
                Set(try await apns.listChannels(bundleID: "com.example.app")) == [stored.channelID, live.channelID])
            #expect(try await apns.listChannels(bundleID: "com.example.other").isEmpty)

            let payload = Array(#"{"aps":{"timestamp":1795000000,"event":"update","content-state":{"eta":4}}}"#.utf8)
            let answer = try await apns.broadcast(
                bundleID: "com.example.app", channelID: stored.channelID, payload: payload, priority: .considerate,
                expiration: 1_795_003_600)
            #expect(answer.uniqueID?.isEmpty == false)
            let received = try #require(state.receivedBroadcasts.last)
            #expect(received.status == 200)
            #expect(received.pushType == "liveactivity")
            #expect(received.priority == "5")
            #expect(received.expiration == "1795003600")
            #expect(received.channelID == stored.channelID)
            #expect(received.payload == payload)

            // No message stored: only expiration 0 (Apple: "results in message rejection").
            let stale = await refusal {
                try await apns.broadcast(
                    bundleID: "com.example.app", channelID: live.channelID, payload: payload, expiration: 60)
            }
            #expect(stale?.reason == .badExpirationDate)
            #expect(stale?.status == 400)
            _ = try await apns.broadcast(bundleID: "com.example.app", channelID: live.channelID, payload: payload)
            // A broadcast cannot start an activity: refused as a payload APNs cannot use.
            let start = Array(
                #"{"aps":{"timestamp":1795000000,"event":"start","content-state":{},"attributes-type":"T","attributes":{},"alert":"x"}}"#
                    .utf8)
            let started = await refusal {
                try await apns.broadcast(bundleID: "com.example.app", channelID: live.channelID, payload: start)
            }
            #expect(started?.reason == .badRequestPayload)
            #expect(started?.status == 400)

            try await apns.deleteChannel(bundleID: "com.example.app", channelID: stored.channelID)
            let gone = await refusal {
                try await apns.readChannel(bundleID: "com.example.app", channelID: stored.channelID)
            }
            #expect(gone?.reason == .channelNotRegistered)
            let afterDelete = await refusal {
                try await apns.broadcast(bundleID: "com.example.app", channelID: stored.channelID, payload: payload)
            }
            #expect(afterDelete?.reason == .channelNotRegistered)
            #expect(try await apns.listChannels(bundleID: "com.example.app") == [live.channelID])
            // Another app's channel does not exist for this one.
            let otherApp = await refusal {
                try await apns.readChannel(bundleID: "com.example.other", channelID: live.channelID)
            }
            #expect(otherApp?.reason == .channelNotRegistered)
        }
    }

    @Test("the app's limit, the Broadcast capability and the bundle id without a push type's suffix")
    func appRules() async throws {
        try await withMock(configure: {
            $0.channelLimitPerApp = 2
            $0.broadcastDisabledBundles = ["com.example.off"]
        }) { base, _ in
            let apns = try client(base)
            defer { Task { try? await apns.shutdown() } }
            _ = try await apns.createChannel(bundleID: "com.example.app", policy: .noMessageStored)
            _ = try await apns.createChannel(bundleID: "com.example.app", policy: .noMessageStored)
            let full = await refusal {
                try await apns.createChannel(bundleID: "com.example.app", policy: .noMessageStored)
            }
            #expect(full?.reason == .cannotCreateChannelConfig)
            #expect(full?.description.contains("delete channels") == true)
            let off = await refusal {
                try await apns.createChannel(bundleID: "com.example.off", policy: .noMessageStored)
            }
            #expect(off?.reason == .featureNotEnabled)
            let suffixed = await refusal {
                try await apns.createChannel(
                    bundleID: "com.example.app.push-type.liveactivity", policy: .noMessageStored)
            }
            #expect(suffixed?.reason == .topicDisallowed)
        }
    }

    @Test("Apple's limit is 10,000 channels per app; deleting one makes room")
    func defaultLimit() throws {
        let channels = MockChannelsProbe()
        for _ in 0..<10_000 { #expect(channels.create("com.a") != nil) }
        #expect(channels.create("com.a") == nil)
        #expect(channels.create("com.b") != nil)
        #expect(channels.deleteOne("com.a"))
        #expect(channels.create("com.a") != nil)
    }

    @Test("requests our client never writes get Apple's reasons (curl over HTTP/2)")
    func rawRequests() async throws {
        let curl = try #require(MockRawHeaderTests.curl, "curl is installed by scripts/install-test-tools.sh")
        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("mock-ca-\(UUID().uuidString).pem")
        try authority.caCertificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: caFile) }
        try await withMock { base, _ in
            let jwt = try APNsJWT.sign(
                keyID: "KEYID12345", teamID: "TEAMID6789", issuedAt: Int64(Date().timeIntervalSince1970),
                key: signingKey)
            func request(_ method: String, _ path: String, _ headers: [String] = [], body: String? = nil) throws
                -> (Int, String?, String)
            {
                var arguments = [
                    "-s", "--http2", "--cacert", caFile.path, "-X", method, "-H", "authorization: bearer \(jwt)",
                    "-D", "-", "-w", "\n%{http_code}",
                ]
                for header in headers { arguments += ["-H", header] }
                if let body { arguments += ["-d", body] }
                arguments.append(base + path)
                let run = try runProgram(curl, arguments)
                let lines = run.out.split(separator: "\n", omittingEmptySubsequences: false)
                let status = Int(lines.last ?? "") ?? -1
                let text = lines.dropLast().joined(separator: "\n")
                let json = text.split(separator: "\r\n\r\n").last.map(String.init) ?? ""
                let reason = (try? JSONValue.decode(Data(json.utf8)))?["reason"]?.stringValue
                return (status, reason, text)
            }
            // node-apn's spelling of the create body ("liveactivity", the policy as a string) is accepted.
            let created = try request(
                "POST", "/1/apps/com.example.app/channels",
                body: #"{"message-storage-policy":"1","push-type":"liveactivity"}"#)
            #expect(created.0 == 201)
            let channelLine = try #require(
                created.2.split(separator: "\r\n").first { $0.lowercased().hasPrefix("apns-channel-id:") })
            let channelID = channelLine.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces)
            let cases: [(String, String, [String], String?, Int, String?)] = [
                (
                    "POST", "/1/apps/com.example.app/channels", [], #"{"push-type":"LiveActivity"}"#, 400,
                    "MissingChannelQueueSize"
                ),
                (
                    "POST", "/1/apps/com.example.app/channels", [],
                    #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#, 400, "BadRequestParams"
                ),
                (
                    "POST", "/1/apps/com.example.app/channels", [], #"{"message-storage-policy":0}"#, 400,
                    "MissingPushType"
                ),
                (
                    "POST", "/1/apps/com.example.app/channels", [],
                    #"{"message-storage-policy":0,"push-type":"alert"}"#, 400, "InvalidPushType"
                ),
                (
                    "POST", "/1/apps/com.example.app/channels", [],
                    #"{"message-storage-policy":0,"push-type":"LiveActivity","x":1}"#, 400, "BadRequestParams"
                ),
                ("POST", "/1/apps/com.example.app/channels", [], "not json", 400, "BadRequestPayload"),
                ("GET", "/1/apps/com.example.app/channels", [], nil, 400, "MissingChannelId"),
                ("GET", "/1/apps/com.example.app/channels", ["apns-channel-id: %%%"], nil, 400, "BadChannelId"),
                (
                    "GET", "/1/apps/com.example.app/channels", ["apns-channel-id: AAAAAAAAAAAAAAAAAAAAAA=="], nil, 400,
                    "ChannelNotRegistered"
                ),
                (
                    "PUT", "/1/apps/com.example.app/channels", ["apns-channel-id: \(channelID)"], nil, 405,
                    "MethodNotAllowed"
                ),
                ("GET", "/1/apps/com.example.app/nothing", [], nil, 404, "BadPath"),
                (
                    "POST", "/4/broadcasts/apps/com.example.app", ["apns-push-type: liveactivity"], #"{"aps":{}}"#, 400,
                    "MissingChannelId"
                ),
                (
                    "POST", "/4/broadcasts/apps/com.example.app", ["apns-channel-id: \(channelID)"], #"{"aps":{}}"#,
                    400, "MissingPushType"
                ),
                (
                    "POST", "/4/broadcasts/apps/com.example.app",
                    ["apns-channel-id: \(channelID)", "apns-push-type: alert"], #"{"aps":{}}"#, 400, "InvalidPushType"
                ),
                (
                    "POST", "/4/broadcasts/apps/com.example.app",
                    ["apns-channel-id: \(channelID)", "apns-push-type: liveactivity", "apns-priority: 7"],
                    #"{"aps":{}}"#, 400, "BadPriority"
                ),
                (
                    "POST", "/4/broadcasts/apps/com.example.app",
                    ["apns-channel-id: \(channelID)", "apns-push-type: liveactivity", "apns-expiration: soon"],
                    #"{"aps":{}}"#, 400, "BadExpirationDate"
                ),
                (
                    "POST", "/4/broadcasts/apps/com.example.app",
                    ["apns-channel-id: \(channelID)", "apns-push-type: LiveActivity"],
                    String(repeating: " ", count: 5121), 413, "PayloadTooLarge"
                ),
                // Apple's header table calls expiration and priority required; widely used clients omit them.
                (
                    "POST", "/4/broadcasts/apps/com.example.app",
                    ["apns-channel-id: \(channelID)", "apns-push-type: Liveactivity"], #"{"aps":{"event":"update"}}"#,
                    200, nil
                ),
                (
                    "POST", "/4/broadcasts/apps/com.example.app",
                    [
                        "apns-channel-id: \(channelID)", "apns-push-type: liveactivity", "apns-priority: 1",
                        "apns-expiration: 0",
                    ], String(repeating: " ", count: 5100) + #"{"aps":{}}"#, 200, nil
                ),
            ]
            for (method, path, headers, body, status, reason) in cases {
                let answer = try request(method, path, headers, body: body)
                #expect(answer.0 == status, "\(method) \(path) \(headers): \(answer.2)")
                #expect(answer.1 == reason, "\(method) \(path) \(headers)")
            }
            // A given apns-request-id is echoed.
            let echoed = try request(
                "GET", "/1/apps/com.example.app/all-channels", ["apns-request-id: 0a0b0c0d-0000-4000-8000-00000000000e"]
            )
            #expect(echoed.2.lowercased().contains("apns-request-id: 0a0b0c0d-0000-4000-8000-00000000000e"))
            #expect(echoed.2.contains(channelID))
        }
    }
}

/// The mock's channel store, driven directly (10,000 creations over HTTP would only measure the transport).
struct MockChannelsProbe {
    let state = MockAPNsState()
    func create(_ bundle: String) -> MockChannel? { state.createChannelForTesting(bundleID: bundle) }
    func deleteOne(_ bundle: String) -> Bool {
        guard let channel = state.broadcastChannels.first(where: { $0.bundleID == bundle }) else { return false }
        return state.deleteChannelForTesting(channel.id, bundleID: bundle)
    }
}

@Suite("The mock keeps several teams' keys and apps")
struct MockTeamsTests {
    static let keyABytes = P256.Signing.PrivateKey().rawRepresentation
    static let keyBBytes = P256.Signing.PrivateKey().rawRepresentation
    static var keyA: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: keyABytes) }
    static var keyB: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: keyBBytes) }
    static let teams = [
        MockTeam(teamID: "TEAMAAAAAA", keys: ["KEYAAAAAAA": keyA.publicKey.pemRepresentation], bundleIDs: ["com.a"]),
        MockTeam(teamID: "TEAMBBBBBB", keys: ["KEYBBBBBBB": keyB.publicKey.pemRepresentation], bundleIDs: ["com.b"]),
    ]

    func sender(_ base: String, keyID: String, teamID: String, key: P256.Signing.PrivateKey) throws -> APNsSender {
        try makeSender(base, credentials: .token(APNsTokenManager(keyID: keyID, teamID: teamID, key: key)))
    }

    @Test("each team's token pushes to its own apps; another team's app is TopicDisallowed")
    func ownApps() async throws {
        try await withMock(teams: Self.teams) { base, state in
            try await withSender(try sender(base, keyID: "KEYAAAAAAA", teamID: "TEAMAAAAAA", key: Self.keyA)) { a in
                try await withSender(try sender(base, keyID: "KEYBBBBBBB", teamID: "TEAMBBBBBB", key: Self.keyB)) { b in
                    #expect(await a.send(push(topic: "com.a")).status == 200)
                    #expect(await b.send(push(topic: "com.b")).status == 200)
                    let live = await a.send(
                        push(
                            topic: "com.a.push-type.liveactivity", pushType: .liveactivity,
                            payload: Array(#"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#.utf8)))
                    #expect(live.status == 200)
                    let crossed = await a.send(push(topic: "com.b"))
                    #expect(crossed.status == 400)
                    #expect(crossed.reason == .topicDisallowed)
                    // The single key configured besides the teams still pushes anywhere.
                    try await withSender(try makeSender(base)) { single in
                        #expect(await single.send(push(topic: "com.b")).status == 200)
                    }
                    #expect(state.receivedPushes.map(\.status) == [200, 200, 200, 400, 200])
                }
            }
        }
    }

    @Test("a token that names one team but is signed with another team's key is InvalidProviderToken")
    func anotherTeamsKey() async throws {
        try await withMock(teams: Self.teams) { base, _ in
            // kid of team A, signed with B's key.
            try await withSender(try sender(base, keyID: "KEYAAAAAAA", teamID: "TEAMAAAAAA", key: Self.keyB)) { s in
                #expect(await s.send(push(topic: "com.a")).reason == .invalidProviderToken)
            }
            // B's own key and kid, but iss says team A.
            try await withSender(try sender(base, keyID: "KEYBBBBBBB", teamID: "TEAMAAAAAA", key: Self.keyB)) { s in
                #expect(await s.send(push(topic: "com.a")).reason == .invalidProviderToken)
            }
        }
    }

    @Test("a certificate cannot send Live Activity pushes (its topics never include .push-type.liveactivity)")
    func liveActivityNeedsToken() async throws {
        try await withMock(clientCA: true) { base, _ in
            let chain = try NIOSSLCertificateLoader.chain(pem: authority.clientCertificatePEM)
            let key = try NIOSSLCertificateLoader.key(pem: authority.clientKeyPEM)
            try await withSender(try makeSender(base, credentials: .certificate(chain: chain, key: key))) { sender in
                let live = await sender.send(
                    push(
                        topic: "com.example.app.push-type.liveactivity", pushType: .liveactivity,
                        payload: Array(#"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#.utf8)))
                #expect(live.status == 400)
                #expect(live.reason == .topicDisallowed)
            }
        }
    }

    @Test("a JWT whose iat is a decimal string (APNSwift 5.0 to 6.4) is accepted, as APNs accepts it")
    func stringIssuedAt() async throws {
        let curl = try #require(MockRawHeaderTests.curl, "curl is installed by scripts/install-test-tools.sh")
        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("mock-ca-\(UUID().uuidString).pem")
        try authority.caCertificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: caFile) }
        try await withMock { base, state in
            let now = Int64(Date().timeIntervalSince1970)
            // As APNSwift 6.4.0's APNSAuthenticationTokenManager writes it: typ, kid repeated, iat a string.
            func token(iat: String) throws -> String {
                let header = APNsJWT.base64URL(Data(#"{"alg":"ES256","typ":"JWT","kid":"KEYID12345"}"#.utf8))
                let claims = APNsJWT.base64URL(
                    Data(#"{"iss":"TEAMID6789","iat":\#(iat),"kid":"KEYID12345"}"#.utf8))
                let signature = try signingKey.signature(for: Data((header + "." + claims).utf8))
                return header + "." + claims + "." + APNsJWT.base64URL(signature.rawRepresentation)
            }
            func send(_ jwt: String) throws -> String {
                let run = try runProgram(
                    curl,
                    [
                        "-s", "--http2", "--cacert", caFile.path, "-H", "authorization: bearer \(jwt)",
                        "-H", "apns-topic: com.example.app", "-d", #"{"aps":{"alert":"hi"}}"#, "-w", "%{http_code}",
                        "\(base)/3/device/\(token64)",
                    ])
                return run.out
            }
            let asString = try send(try token(iat: "\"\(now)\""))
            let asNumber = try send(try token(iat: "\(now)"))
            // Still refused: not digits, or an hour old.
            let fraction = try send(try token(iat: "\"\(now).5\""))
            let old = try send(try token(iat: "\"\(now - 3_700)\""))
            #expect(asString == "200")
            #expect(asNumber == "200")
            #expect(fraction.contains("InvalidProviderToken"))
            #expect(old.contains("ExpiredProviderToken"))
            #expect(state.receivedPushes.map(\.status) == [200, 200, 403, 403])
        }
    }
}
