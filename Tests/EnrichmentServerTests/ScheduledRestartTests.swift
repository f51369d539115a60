import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Scheduled pushes are durable: they wait in the outbox, not in memory (issue 30).
@Suite("Scheduled pushes survive a restart; a cap holds across two nodes", .serialized)
struct ScheduledRestartTests {
    @Test("a push scheduled 4 s ahead, its node killed (kill -9) before then and started again: sent once, on time")
    func restart() async throws {
        try await withMock { mock, state in
            let setup = try DeliveryDurabilityTests.Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            let first = try ServerProcess.start(database: setup.database, environment: setup.environment)
            let client = ServiceClient(base: "http://127.0.0.1:\(first.port)")
            let token = DeliveryDurabilityTests.token(1, 0)
            let registered = try await client.put(
                "/v1/devices/s1/apns-tokens/\(token)", json: #"{"topic":"com.example.app","environment":"sandbox"}"#)
            #expect(registered.status == 201)
            let sendAt = Int64(Date().timeIntervalSince1970) + 4
            let accepted = try await client.post(
                "/v1/push",
                json:
                    #"{"device_ids":["s1"],"payload":{"aps":{"alert":"later","timestamp":"{{now}}"}},"enrich":false,"send_at":\#(sendAt)}"#
            )
            #expect(accepted.status == 202, "\(accepted.text)")
            let pushId = try #require(accepted.json?["push_id"]?.stringValue)
            first.kill9()
            #expect(state.receivedCount == 0)
            let second = try ServerProcess.start(database: setup.database, environment: setup.environment)
            defer { second.kill9() }
            try await DeliveryDurabilityTests.waitForReceived(state, atLeast: 1, seconds: 30)
            try await Task.sleep(for: .seconds(1))
            #expect(state.receivedCount == 1)
            #expect((state.receivedPushes.first?.receivedAt ?? 0) >= Double(sendAt))
            let report = try await ServiceClient(base: "http://127.0.0.1:\(second.port)").get("/v1/push/\(pushId)")
            #expect(report.json?["counts"]?["delivered"] == .int(1), "\(report.text)")
        }
    }

    @Test("a cap of one push per hour holds when two nodes on one PostgreSQL take pushes to the same devices at once")
    func capAcrossNodes() async throws {
        try await withMock { mock, state in
            let setup = try DeliveryDurabilityTests.Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            var environment = setup.environment
            environment["ENRICH_DATABASE_URL"] = try await PostgresTestDatabase.makeURL()
            let a = try ServerProcess.start(
                database: setup.directory.appendingPathComponent("a.sqlite").path, environment: environment)
            defer { a.kill9() }
            let b = try ServerProcess.start(
                database: setup.directory.appendingPathComponent("b.sqlite").path, environment: environment)
            defer { b.kill9() }
            let nodes = [a, b].map { ServiceClient(base: "http://127.0.0.1:\($0.port)") }
            let devices = (0..<20).map { "c\($0)" }
            for (index, device) in devices.enumerated() {
                let reply = try await nodes[index % 2].put(
                    "/v1/devices/\(device)/apns-tokens/\(DeliveryDurabilityTests.token(index, 0))",
                    json: #"{"topic":"com.example.app","environment":"sandbox"}"#)
                #expect(reply.status == 201)
            }
            let ids = devices.map { #""\#($0)""# }.joined(separator: ",")
            let body =
                #"{"device_ids":[\#(ids)],"payload":{"aps":{"alert":"offer"}},"enrich":false,"wait":true,"cap":{"max":1,"window_s":3600}}"#
            // Eight pushes, four on each node, all at once.
            let replies = try await withThrowingTaskGroup(of: ServiceClient.Reply.self) { group in
                for index in 0..<8 { group.addTask { try await nodes[index % 2].post("/v1/push", json: body) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.allSatisfy { $0.status == 200 || $0.status == 202 }, "\(replies.map(\.text))")
            let capped = replies.compactMap { $0.json?["summary"]?["capped"]?.lenientDouble }.reduce(0, +)
            #expect(capped == Double(devices.count * 7), "every device had one push; the other seven were capped")
            try await DeliveryDurabilityTests.waitForReceived(state, atLeast: devices.count, seconds: 30)
            try await Task.sleep(for: .seconds(1))
            let perToken = Dictionary(grouping: state.receivedPushes, by: \.deviceToken).mapValues(\.count)
            #expect(perToken.count == devices.count)
            #expect(perToken.values.allSatisfy { $0 == 1 }, "\(perToken)")
        }
    }
}
