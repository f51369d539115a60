import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Issue 47, item 6: a credential APNs refuses (403 InvalidProviderToken: here a team id the key is not of) is said
/// as such in the log, in readiness and in the push's report, naming the team and key id, never the key.
@Suite("A refused credential is said as such", .serialized)
struct CredentialRefusedTests {
    @Test("403 InvalidProviderToken: an error line naming team and key, apns_causes in ready, waiting in the report")
    func refused() async throws {
        try await withMock { mock, state in
            let setup = try DeliveryDurabilityTests.Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            var environment = setup.environment
            // The mock knows the key as team TEAMID6789's: signed as another team's, every push is refused.
            environment["ENRICH_APNS_TEAM_ID"] = "REVOKED999"
            let log = setup.directory.appendingPathComponent("server.log")
            let server = try ServerProcess.start(database: setup.database, environment: environment, logFile: log)
            defer { server.kill9() }
            let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
            for device in 0..<3 {
                let reply = try await client.put(
                    "/v1/devices/r\(device)/apns-tokens/\(DeliveryDurabilityTests.token(device, 0))",
                    json: #"{"topic":"com.example.app","environment":"sandbox"}"#)
                #expect(reply.status == 201)
            }
            let accepted = try await client.post(
                "/v1/push",
                json: #"{"device_ids":["r0","r1","r2"],"payload":{"aps":{"alert":"hi"}},"enrich":false,"wait":false}"#)
            #expect(accepted.status == 202, "\(accepted.text)")
            let pushId = try #require(accepted.json?["push_id"]?.stringValue)

            var report: ServiceClient.Reply?
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                report = try await client.get("/v1/push/\(pushId)")
                if case .array(let groups)? = report?.json?["waiting"], !groups.isEmpty { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let waiting = try #require(report?.json?["waiting"]?[0], "\(report?.text ?? "")")
            #expect(waiting["status"] == .int(403))
            #expect(waiting["reason"] == .string("InvalidProviderToken"))
            #expect(report?.json?["counts"]?["pending"] == .int(3), "the deliveries wait; none failed")
            #expect(report?.json?["counts"]?["failed"] == .int(0))
            #expect(state.receivedPushes.allSatisfy { $0.status == 403 })

            let ready = try await client.get("/health/ready")
            #expect(ready.status == 200, "APNs never makes a node unready")
            #expect(ready.json?["apns"]?["sandbox"] != .string("closed"), "\(ready.text)")
            let cause = ready.json?["apns_causes"]?["sandbox"]?.stringValue ?? ""
            #expect(cause.contains("credential refused: 403 InvalidProviderToken"), "\(ready.text)")
            #expect(cause.contains("team REVOKED999") && cause.contains("key KEYID12345"), "\(cause)")

            let text = try String(contentsOf: log, encoding: .utf8)
            let line = text.split(separator: "\n").first { $0.contains("APNs refused the credential") }
            #expect(line?.contains("team REVOKED999, key KEYID12345") == true, "\(text.suffix(2_000))")
            #expect(!text.contains("APNs unreachable"), "a refused credential is not called unreachable")
            #expect(!text.contains("BEGIN PRIVATE KEY"))
        }
    }
}
