import APNsCore
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Two service nodes (two applications in this process, each with its own caches and index) on one PostgreSQL.
@Suite("Two nodes on one PostgreSQL behave as one service", .serialized)
struct TwoNodeTests {
    @Test(
        "a fix reported to one node is the other's next enrichment; a POI import reaches the other's index within a second; 10,000 deliveries posted to one node are sent by both, each once"
    )
    func twoNodes() async throws {
        let url = try await PostgresTestDatabase.makeURL()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("two-nodes-\(UUID().uuidString)")
        let (keyFile, caFile) = try writeMockCredentials(into: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withMock { mock, state in
            let node: @Sendable (inout ServiceConfiguration) -> Void = { configuration in
                configuration.databaseURL = Secret(url)
                deliverToMock(&configuration, keyFile: keyFile, caFile: caFile, sandbox: mock, production: mock)
                configuration.delivery.concurrency = 20
            }
            try await withService(node) { a in
                try await withService(node) { b in
                    // 1. The last fix: reported to A, used by B; then reported to B, used by A.
                    try await reportFix(a, "roamer", lat: 48.8584, lng: 2.2945)
                    let now = Int64(Date().timeIntervalSince1970)
                    let payload = locationPayload(timestamp: String(now))
                    let onB = try await b.post("/v1/enrich", json: enrichBody(device: "roamer", payload: payload))
                    #expect(onB.json?["outcome"] == .string("enriched"))
                    #expect(onB.json?["fix"]?["latitude"] == .double(48.8584))
                    try await reportFix(b, "roamer", lat: 51.5194, lng: -0.1270)
                    let onA = try await a.post("/v1/enrich", json: enrichBody(device: "roamer", payload: payload))
                    #expect(onA.json?["fix"]?["latitude"] == .double(51.5194))

                    // 2. A POI imported on A is in B's in-memory index within a second.
                    let imported = try await a.post(
                        "/v1/pois",
                        json:
                            #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"store_id":"two-node-poi","name":"Imported on A"},"geometry":{"type":"Point","coordinates":[10.0,-10.0]}}]}"#
                    )
                    #expect(imported.status == 200)
                    let started = ContinuousClock.now
                    var seen = false
                    while !seen, ContinuousClock.now - started < .seconds(3) {
                        let found = try await b.get("/stores/search/?lat=-10&lng=10&stores_by_page=1")
                        seen = found.json?["features"]?[0]?["properties"]?["store_id"] == .string("two-node-poi")
                        if !seen { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    let elapsed = ContinuousClock.now - started
                    #expect(seen)
                    #expect(elapsed < .seconds(1), "B saw the import after \(elapsed)")

                    // 2b. A POI deleted on A leaves B's nearest answers within a second (pushed by NOTIFY).
                    let deleted = try await a.delete("/v1/pois/two-node-poi")
                    #expect(deleted.status == 200 || deleted.status == 204)
                    let deleteStarted = ContinuousClock.now
                    var gone = false
                    while !gone, ContinuousClock.now - deleteStarted < .seconds(3) {
                        let found = try await b.get("/stores/search/?lat=-10&lng=10&stores_by_page=1")
                        gone = found.json?["features"]?[0]?["properties"]?["store_id"] != .string("two-node-poi")
                        if !gone { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    let deleteElapsed = ContinuousClock.now - deleteStarted
                    #expect(gone, "B still answers with the POI deleted on A")
                    #expect(deleteElapsed < .seconds(1), "B saw the delete after \(deleteElapsed)")

                    // 3. 10,000 deliveries (ten pushes of 1,000) committed on A are claimed by both nodes'
                    // workers in chunks, each sent once.
                    let count = 10_000
                    let ids = (0..<count).map { "many-\($0)" }
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for lane in 0..<16 {
                            group.addTask {
                                for index in stride(from: lane, to: count, by: 16) {
                                    let reply = try await register(
                                        index % 2 == 0 ? a : b, ids[index], deviceToken(5_000 + index))
                                    #expect(reply.status == 201)
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                    for index in 0..<count {
                        state.script(
                            FailureScript(status: 200, delayMilliseconds: 20), for: deviceToken(5_000 + index))
                    }
                    var pushIds: [String] = []
                    for start in stride(from: 0, to: count, by: 1_000) {
                        let accepted = try await a.post(
                            "/v1/push",
                            json: pushBody(devices: Array(ids[start..<start + 1_000]), extra: #""wait":false"#))
                        #expect(accepted.status == 202)
                        pushIds.append(try #require(accepted.json?["push_id"]?.stringValue))
                    }
                    let deadline = Date().addingTimeInterval(120)
                    for pushId in pushIds {
                        var report = try await b.get("/v1/push/\(pushId)")
                        while report.json?["done"] != .bool(true), Date() < deadline {
                            try await Task.sleep(for: .milliseconds(100))
                            report = try await b.get("/v1/push/\(pushId)")
                        }
                        #expect(report.json?["counts"]?["delivered"] == .int(1_000))
                    }
                    let received = Dictionary(state.receivedPushes.map { ($0.deviceToken, 1) }, uniquingKeysWith: +)
                    #expect(received.count == count)
                    #expect(received.values.allSatisfy { $0 == 1 }, "a delivery was sent twice")
                    // Both nodes drain the batch posted to A: each sends at least 30% of it.
                    let sentByA = attempts(in: try await a.get("/metrics").text)
                    let sentByB = attempts(in: try await b.get("/metrics").text)
                    #expect(sentByA + sentByB == count)
                    #expect(
                        sentByA >= count * 3 / 10 && sentByB >= count * 3 / 10, "A sent \(sentByA), B sent \(sentByB)")
                }
            }
        }
    }
}

/// The sum of a node's `apns_delivery_attempts_total` series (every attempt it made).
func attempts(in metrics: String) -> Int {
    metrics.split(separator: "\n").filter { $0.hasPrefix("apns_delivery_attempts_total") }.reduce(0) {
        $0 + (Int(Double($1.split(separator: " ").last ?? "") ?? 0))
    }
}
