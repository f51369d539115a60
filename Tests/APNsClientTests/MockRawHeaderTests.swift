import APNsCore
import Crypto
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// The mock judges header values as text, as APNs does: values our typed sender cannot write are sent here by
/// curl (an HTTP/2 client nobody here wrote), so the mock's answers to them are checked against a real peer.
@Suite("Mock APNs answers raw header values like Apple (curl over HTTP/2 + TLS)")
struct MockRawHeaderTests {
    static let curl: URL? = ["/usr/bin/curl", "/bin/curl"].map(URL.init(fileURLWithPath:)).first {
        FileManager.default.isExecutableFile(atPath: $0.path)
    }

    /// Posts `{"aps":{}}` with `headers` through curl; returns the status and the reason of the answer.
    static func post(_ base: String, headers: [String: String], caFile: String) throws -> (Int, String?) {
        let curl = try #require(Self.curl, "curl is installed by scripts/install-test-tools.sh")
        let jwt = try APNsJWT.sign(
            keyID: "KEYID12345", teamID: "TEAMID6789", issuedAt: Int64(Date().timeIntervalSince1970),
            key: signingKey)
        var arguments = [
            "-s", "--http2", "--cacert", caFile, "-X", "POST", "-H", "authorization: bearer \(jwt)",
            "-H", "apns-topic: com.example.app", "-d", #"{"aps":{}}"#, "-w", "\n%{http_code} %{http_version}",
        ]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("\(base)/3/device/\(token64)")
        let run = try runProgram(curl, arguments)
        #expect(run.status == 0, "curl failed: \(run.err)")
        let lines = run.out.split(separator: "\n", omittingEmptySubsequences: false)
        let trailer = lines.last.map(String.init) ?? ""
        #expect(trailer.hasSuffix(" 2"), "not HTTP/2: \(trailer)")
        let status = Int(trailer.split(separator: " ").first ?? "") ?? -1
        let body = lines.dropLast().joined(separator: "\n")
        let reason: String? =
            if case .object(let members)? = try? JSONValue.decode(Data(body.utf8)) {
                members["reason"]?.stringValue
            } else { nil }
        return (status, reason)
    }

    @Test("priority, push type and expiration are judged as the text that arrives")
    func rawValues() async throws {
        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("mock-ca-\(UUID().uuidString).pem")
        try authority.caCertificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: caFile) }
        try await withMock { base, state in
            let cases: [([String: String], Int, String?)] = [
                ([:], 200, nil),
                (["apns-priority": "3"], 400, "BadPriority"),
                (["apns-priority": "ten"], 400, "BadPriority"),
                (["apns-push-type": "smoke-signal"], 400, "InvalidPushType"),
                (["apns-push-type": "background", "apns-priority": "10"], 400, "BadPriority"),
                (["apns-push-type": "background", "apns-priority": "5"], 200, nil),
                (["apns-expiration": "tomorrow"], 400, "BadExpirationDate"),
                (["apns-expiration": "-5"], 400, "BadExpirationDate"),
                (["apns-expiration": "0", "apns-priority": "1"], 200, nil),
            ]
            for (headers, status, reason) in cases {
                let answer = try Self.post(base, headers: headers, caFile: caFile.path)
                #expect(answer.0 == status, "\(headers)")
                #expect(answer.1 == reason, "\(headers)")
            }
            // The record keeps the raw text received.
            #expect(state.receivedPushes.contains { $0.priority == "ten" })
            #expect(state.receivedPushes.contains { $0.pushType == "smoke-signal" })
        }
    }
}
