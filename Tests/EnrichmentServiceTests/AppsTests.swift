import APNsCore
import Crypto
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Two apps of two teams in one service, sending to one mock that knows both teams.
@Suite("Several apps in one service (ENRICH_APPS_FILE)")
struct AppsTests {
    static let keyABytes = P256.Signing.PrivateKey().rawRepresentation
    static let keyBBytes = P256.Signing.PrivateKey().rawRepresentation
    static var keyA: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: keyABytes) }
    static var keyB: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: keyBBytes) }
    static var teams: [MockTeam] {
        [
            MockTeam(
                teamID: "TEAMAAAAAA", keys: ["KEYAAAAAAA": keyA.publicKey.pemRepresentation],
                bundleIDs: ["com.a", "com.c"]),
            MockTeam(
                teamID: "TEAMBBBBBB", keys: ["KEYBBBBBBB": keyB.publicKey.pemRepresentation], bundleIDs: ["com.b"]),
        ]
    }

    /// Writes the keys and an apps file; `keyBFile` may be a key APNs does not know (a revoked one).
    /// `extra` follows the two apps in `apps`; `members` follows `apps` in the file (e.g. `"keys": [...]`).
    static func writeApps(
        into directory: URL, keyB: P256.Signing.PrivateKey = keyB, extra: String = "", members: String = ""
    ) throws -> String {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try keyA.pemRepresentation.write(
            to: directory.appendingPathComponent("AuthKey_A.p8"), atomically: true, encoding: .utf8)
        try keyB.pemRepresentation.write(
            to: directory.appendingPathComponent("AuthKey_B.p8"), atomically: true, encoding: .utf8)
        let file = directory.appendingPathComponent("apps.json")
        try #"""
        {"credentials": {
           "team-a": {"key_file": "AuthKey_A.p8", "key_id": "KEYAAAAAAA", "team_id": "TEAMAAAAAA"},
           "team-b": {"key_file": "AuthKey_B.p8", "key_id": "KEYBBBBBBB", "team_id": "TEAMBBBBBB"}},
         "apps": [{"id": "consumer", "bundle_id": "com.a", "credential": "team-a"},
                  {"id": "courier", "bundle_id": "com.b", "credential": "team-b"}\#(extra)]\#(members.isEmpty ? "" : ", " + members)}
        """#.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    func withApps<T: Sendable>(
        keyB: P256.Signing.PrivateKey = keyB, members: String = "", extra: String = "",
        _ adjust: @escaping @Sendable (inout ServiceConfiguration) -> Void = { _ in },
        _ body: @Sendable (ServiceClient, MockAPNsState) async throws -> T
    ) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apps-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let appsFile = try Self.writeApps(into: directory, keyB: keyB, extra: extra, members: members)
        let caFile = directory.appendingPathComponent("ca.pem").path
        try authority.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        return try await withMock(teams: Self.teams) { sandboxURL, sandbox in
            try await withService({ configuration in
                configuration.delivery.appsFile = appsFile
                configuration.delivery.caFile = caFile
                configuration.delivery.sandboxURL = sandboxURL
                configuration.delivery.productionURL = sandboxURL
                configuration.delivery.retryDelay = 0.05
                configuration.delivery.probeInterval = 0.2
                configuration.delivery.channelsSandboxURL = sandboxURL
                configuration.delivery.broadcastSandboxURL = sandboxURL
                adjust(&configuration)
            }) { client in try await body(client, sandbox) }
        }
    }

    static let consumer = ["Enrich-App": "consumer"]
    static let courier = ["Enrich-App": "courier"]

    @Test("each push carries its own team's JWT and its app's topic, through one service, two apps at once")
    func twoTeams() async throws {
        try await withApps { client, mock in
            _ = try await register(client, "phone-a", deviceToken(1), topic: "com.a", headers: Self.consumer)
            _ = try await register(client, "phone-b", deviceToken(2), topic: "com.b", headers: Self.courier)
            let now = Int64(Date().timeIntervalSince1970)
            let payload = #"{"aps":{"alert":"hi","timestamp":\#(now)}}"#
            let bodyA = pushBody(devices: ["phone-a"], payload: payload, extra: #""enrich":false"#)
            let bodyB = pushBody(devices: ["phone-b"], payload: payload, extra: #""enrich":false"#)
            async let first = client.post("/v1/push", json: bodyA, headers: Self.consumer)
            async let second = client.post("/v1/push", json: bodyB, headers: Self.courier)
            let (replyA, replyB) = try await (first, second)
            #expect(replyA.json?["counts"]?["delivered"] == .int(1), "\(replyA.text)")
            #expect(replyB.json?["counts"]?["delivered"] == .int(1), "\(replyB.text)")
            let byToken = Dictionary(uniqueKeysWithValues: mock.receivedPushes.map { ($0.deviceToken, $0) })
            #expect(byToken[deviceToken(1)]?.topic == "com.a")
            #expect(byToken[deviceToken(1)]?.providerTeamID == "TEAMAAAAAA")
            #expect(byToken[deviceToken(1)]?.providerKeyID == "KEYAAAAAAA")
            #expect(byToken[deviceToken(2)]?.topic == "com.b")
            #expect(byToken[deviceToken(2)]?.providerTeamID == "TEAMBBBBBB")
            // A topic no app declares, with no default credentials: refused for that delivery, with why.
            _ = try await register(client, "phone-c", deviceToken(3), topic: "com.c")
            let orphan = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["phone-c"], payload: #"{"aps":{"alert":"hi","timestamp":\#(now)}}"#,
                    extra: #""enrich":false"#))
            #expect(orphan.json?["counts"]?["failed"] == .int(1))
            #expect("\(orphan.json ?? .null)".contains("ENRICH_APPS_FILE"))
        }
    }

    @Test("one app's revoked key stops only its deliveries, which wait and say why; the other app keeps sending")
    func revokedKey() async throws {
        try await withApps(keyB: P256.Signing.PrivateKey()) { client, mock in
            _ = try await register(client, "phone-a", deviceToken(1), topic: "com.a", headers: Self.consumer)
            _ = try await register(client, "phone-b", deviceToken(2), topic: "com.b", headers: Self.courier)
            let now = Int64(Date().timeIntervalSince1970)
            var pushIDs: [String: String] = [:]
            for (device, app) in [("phone-a", Self.consumer), ("phone-b", Self.courier)] {
                let reply = try await client.post(
                    "/v1/push",
                    json: pushBody(
                        devices: [device], payload: #"{"aps":{"alert":"hi","timestamp":\#(now)}}"#,
                        extra: #""enrich":false,"wait":false"#), headers: app)
                pushIDs[device] = try #require(reply.json?["push_id"]?.stringValue)
            }
            var statusA: ServiceClient.Reply?
            for _ in 0..<60 {
                try await Task.sleep(for: .milliseconds(100))
                statusA = try await client.get("/v1/push/\(pushIDs["phone-a"]!)", headers: Self.consumer)
                if statusA?.json?["counts"]?["delivered"] == .int(1) { break }
            }
            try await Task.sleep(for: .milliseconds(300))
            let statusB = try await client.get("/v1/push/\(pushIDs["phone-b"]!)", headers: Self.courier)
            #expect(statusA?.json?["counts"]?["delivered"] == .int(1))
            #expect(statusB.json?["counts"]?["pending"] == .int(1), "\(statusB.text)")
            #expect(statusB.json?["counts"]?["failed"] == .int(0))
            // B's pushes reached APNs and were refused for the key, again at each probe; A's was accepted.
            let refusedB = mock.receivedPushes.filter { $0.deviceToken == deviceToken(2) }
            #expect(!refusedB.isEmpty)
            #expect(refusedB.allSatisfy { $0.reason == "InvalidProviderToken" })
            #expect(mock.receivedPushes.filter { $0.deviceToken == deviceToken(1) }.map(\.status) == [200])
        }
    }

    @Test("the apps file is checked at start-up: each problem names the app or credential")
    func fileProblems() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apps-bad-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(String, String)] = [
            (#",{"id": "shop", "bundle_id": "com.s", "credential": "team-z"}"#, "app 'shop' names credential 'team-z'"),
            (#",{"id": "twin", "bundle_id": "com.a", "credential": "team-a"}"#, "the same bundle_id 'com.a'"),
            (#",{"id": "default", "bundle_id": "com.d", "credential": "team-a"}"#, "app 'default'"),
            (#",{"id": "Bad Id", "bundle_id": "com.d", "credential": "team-a"}"#, "apps[2]: id is required"),
            (#",{"id": "bare", "bundle_id": "com.d"}"#, "app 'bare': credential (APNs, for its iOS devices) or fcm"),
        ]
        // A credential may not take the ENRICH_APNS_* settings' name.
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let reserved = directory.appendingPathComponent("reserved.json")
        try
            #"{"credentials":{"default":{"p12_file":"x.p12"}},"apps":[{"id":"a","bundle_id":"com.a","credential":"default"}]}"#
            .write(to: reserved, atomically: true, encoding: .utf8)
        #expect(throws: ConfigurationError.self) { try AppsConfiguration.load(path: reserved.path) }
        for (extra, expected) in cases {
            let file = try Self.writeApps(into: directory, extra: extra)
            do {
                _ = try AppsConfiguration.load(path: file)
                Issue.record("accepted: \(extra)")
            } catch {
                #expect(error.description.contains(expected), "\(error.description)")
                #expect(error.description.contains("ENRICH_APPS_FILE"))
            }
        }
        let good = try AppsConfiguration.load(path: try Self.writeApps(into: directory))
        #expect(good.app(forTopic: "com.b.push-type.liveactivity")?.id == "courier")
        #expect(good.app(forTopic: "com.b")?.credential == "team-b")
        #expect(good.app(forTopic: "com.z") == nil)
        #expect(good.credentials["team-a"]?.usesToken == true)
    }
}

@Suite("The example apps file")
struct AppsExampleTests {
    @Test("certs.example/apps.example.json is read as documented: three apps, two credentials, four scoped keys")
    func exampleLoads() throws {
        let path = ContractTests.root.appendingPathComponent("certs.example/apps.example.json").path
        let apps = try AppsConfiguration.load(path: path)
        #expect(apps.apps.map(\.id) == ["consumer", "consumer-white-label", "courier"])
        #expect(apps.credentials.keys.sorted() == ["acme-team", "courier-cert"])
        #expect(apps.keys.map(\.access) == [.admin, .all, .read, .send])
        #expect(apps.keys.map(\.app) == [nil, "consumer", "consumer", "courier"])
        // The file holds each key's SHA-256 only.
        let digest = Array(SHA256.hash(data: Data("example-consumer-key".utf8)))
        #expect(apps.keys[1].digest == digest)
        #expect(!"\(apps.keys[1])".contains("sha"))
    }
}
