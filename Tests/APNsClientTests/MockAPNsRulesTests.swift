import APNsCore
import Crypto
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Issue 47, item 5: rules of Apple's that the mock now holds, checked with curl (an HTTP/2 client nobody here
/// wrote): one team per connection, a Live Activity's priority, and no broadcast that starts an activity.
@Suite("Mock APNs: one team per connection, Live Activity priorities, no broadcast start")
struct MockAPNsRulesTests {
    static let otherKeyBytes = P256.Signing.PrivateKey().rawRepresentation
    static var otherKey: P256.Signing.PrivateKey {
        // swift-format-ignore: NeverUseForceTry
        try! P256.Signing.PrivateKey(rawRepresentation: otherKeyBytes)
    }

    /// One curl run: each request in `requests` (headers, path, body) in turn, `--next` between them, so curl
    /// reuses its one HTTP/2 connection. Returns per request the status, the reason and the connections opened.
    static func curl(
        _ base: String, caFile: String, _ requests: [(headers: [String], path: String, body: String)]
    ) throws -> [(status: Int, reason: String?, connects: Int)] {
        let curl = try #require(MockRawHeaderTests.curl, "curl is installed by scripts/install-test-tools.sh")
        var arguments: [String] = []
        for (index, request) in requests.enumerated() {
            if index > 0 { arguments.append("--next") }
            arguments += ["-s", "--http2", "--cacert", caFile, "-X", "POST", "-d", request.body]
            for header in request.headers { arguments += ["-H", header] }
            arguments += ["-w", "\n=%{http_code} %{num_connects}\n", base + request.path]
        }
        let run = try runProgram(curl, arguments)
        #expect(run.status == 0, "curl failed: \(run.err)")
        var answers: [(Int, String?, Int)] = []
        var body = ""
        for line in run.out.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("=") {
                let parts = line.dropFirst().split(separator: " ")
                let reason = (try? JSONValue.decode(Data(body.utf8)))?["reason"]?.stringValue
                answers.append((Int(parts.first ?? "") ?? -1, reason, Int(parts.last ?? "") ?? -1))
                body = ""
            } else {
                body += line
            }
        }
        return answers
    }

    static func bearer(team: String, keyID: String, key: P256.Signing.PrivateKey) throws -> String {
        "authorization: bearer "
            + (try APNsJWT.sign(
                keyID: keyID, teamID: team, issuedAt: Int64(Date().timeIntervalSince1970), key: key))
    }

    static func withCAFile<T>(_ body: (String) async throws -> T) async throws -> T {
        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("mock-ca-\(UUID().uuidString).pem")
        try authority.caCertificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: caFile) }
        return try await body(caFile.path)
    }

    @Test("a token of a second team on a connection that authenticated a team is 403 InvalidProviderToken")
    func oneTeamPerConnection() async throws {
        let other = MockTeam(teamID: "OTHERTEAM1", keys: ["OTHERKEY01": Self.otherKey.publicKey.pemRepresentation])
        try await Self.withCAFile { caFile in
            try await withMock(teams: [other]) { base, state in
                let first = try Self.bearer(team: "TEAMID6789", keyID: "KEYID12345", key: signingKey)
                let second = try Self.bearer(team: "OTHERTEAM1", keyID: "OTHERKEY01", key: Self.otherKey)
                let push = "/3/device/\(token64)"
                let topic = "apns-topic: com.example.app"
                let body = #"{"aps":{"alert":"hi"}}"#
                let answers = try Self.curl(
                    base, caFile: caFile,
                    [([first, topic], push, body), ([second, topic], push, body), ([first, topic], push, body)])
                try #require(answers.count == 3, "\(answers)")
                #expect(answers[0].status == 200)
                #expect(answers[1].status == 403)
                #expect(answers[1].reason == "InvalidProviderToken")
                #expect(answers[2].status == 200, "the connection's own team still pushes")
                #expect(answers.map(\.connects) == [1, 0, 0], "curl reused its one connection")
                // The second team on a connection of its own is fine.
                let alone = try Self.curl(base, caFile: caFile, [([second, topic], push, body)])
                #expect(alone.first?.status == 200)
                #expect(state.receivedPushes.filter { $0.status == 200 }.count == 3)
            }
        }
    }

    @Test("liveactivity with apns-priority 1 is 400 BadPriority; 5 and 10 are accepted")
    func liveActivityPriority() async throws {
        try await Self.withCAFile { caFile in
            try await withMock { base, _ in
                let auth = try Self.bearer(team: "TEAMID6789", keyID: "KEYID12345", key: signingKey)
                let body = #"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#
                let requests = ["1", "5", "10"].map { priority in
                    (
                        [
                            auth, "apns-topic: com.example.app.push-type.liveactivity",
                            "apns-push-type: liveactivity", "apns-priority: \(priority)",
                        ], "/3/device/\(token64)", body
                    )
                }
                let answers = try Self.curl(base, caFile: caFile, requests)
                #expect(answers.map(\.status) == [400, 200, 200], "\(answers)")
                #expect(answers.first?.reason == "BadPriority")
            }
        }
    }

    @Test("the validator push-sender uses refuses a liveactivity push of priority 1 before sending")
    func senderRefusesLocally() {
        let request = APNsWireRequest(
            deviceToken: token64, topic: "com.example.app.push-type.liveactivity", pushType: "liveactivity",
            priority: "1", expiration: nil, collapseID: nil, apnsID: nil, payload: Array(#"{"aps":{}}"#.utf8))
        #expect(APNsValidator.violation(of: request)?.reason == .badPriority)
    }
}
