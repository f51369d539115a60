import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// The request bound on PostgreSQL (`ENRICH_DATABASE_TIMEOUT`) cuts a request waiting for the database, not a
/// request that waits by design.
@Suite("The database deadline on PostgreSQL", .serialized)
struct DatabaseDeadlineTests {
    @Test("a wait:true push (or a GET ?wait=) whose deliveries take longer than ENRICH_DATABASE_TIMEOUT still answers")
    func pushWaitIsNotCut() async throws {
        let url = try await PostgresTestDatabase.makeURL()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("deadline-\(UUID().uuidString)")
        let (keyFile, caFile) = try writeMockCredentials(into: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withMock { mock, state in
            try await withService({ configuration in
                configuration.databaseURL = Secret(url)
                configuration.databaseConnectTimeout = 1
                deliverToMock(&configuration, keyFile: keyFile, caFile: caFile, sandbox: mock, production: mock)
            }) { client in
                let reply = try await register(client, "slow", deviceToken(77))
                #expect(reply.status == 201)
                state.script(FailureScript(status: 200, delayMilliseconds: 1_500), for: deviceToken(77))
                let started = Date()
                let push = try await client.post("/v1/push", json: pushBody(devices: ["slow"]))
                #expect(push.status == 200, "\(push.text)")
                #expect(firstDelivery(devices(push)["slow"])?["state"] == .string("delivered"))
                #expect(Date().timeIntervalSince(started) >= 1.5)
                // So does a GET that waits for a push's end (`?wait=`).
                let accepted = try await client.post(
                    "/v1/push", json: pushBody(devices: ["slow"], extra: #""wait":false"#))
                let id = accepted.json?["push_id"]?.stringValue ?? "none"
                let watchStarted = Date()
                let watched = try await client.get("/v1/push/\(id)?wait=20")
                #expect(watched.status == 200, "\(watched.text)")
                #expect(watched.json?["done"] == .bool(true))
                #expect(Date().timeIntervalSince(watchStarted) >= 1.4)
                // An ordinary request is bounded, and answers at once when the database is there.
                #expect(try await client.get("/v1/devices/slow/apns-tokens").status == 200)
            }
        }
    }
}
