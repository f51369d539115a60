import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import InMemoryTracing
import MockAPNs
import TestSupport
import Testing
import Tracing

/// The spans one enrichment and one delivery leave, recorded by an in-memory tracer given to the engine.
@Suite("Tracing: the spans of an enrichment and of a delivery")
struct TracingTests {
    @Test(
        "an enrichment is one span with its fix read, context read and places search inside; a delivery batch holds its enrichment, APNs send and write"
    )
    func spans() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tracing-\(UUID().uuidString)")
        let (keyFile, caFile) = try writeMockCredentials(into: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withMock { mock, state in
            var configuration = ServiceConfiguration()
            configuration.databasePath = directory.appendingPathComponent("db.sqlite").path
            deliverToMock(&configuration, keyFile: keyFile, caFile: caFile, sandbox: mock, production: mock)
            let tracer = InMemoryTracer()
            let runtime = try await EnrichmentRuntime.open(configuration, tracer: tracer)
            let now = Date().timeIntervalSince1970
            try await runtime.fixes.insert([
                LocationFix(
                    deviceId: "traced", coordinate: Coordinate(latitude: 48.8584, longitude: 2.2945), fixTime: now,
                    horizontalAccuracy: 10, context: nil, receivedAt: now)
            ])
            let payload = try NotificationPayload(
                json: .object([
                    "aps": .object([
                        "alert": .object(["title": .string("Nearby"), "body": .string("x")]),
                        "mutable-content": .int(1), "category": .string("location"), "timestamp": .int(Int64(now)),
                    ])
                ]))

            // 1. One enrichment.
            let result = try await runtime.enricher.enrich(deviceId: "traced", payload: payload)
            #expect(result.outcome == .enriched)
            let enrichment = try #require(tracer.finishedSpans.first { $0.operationName == "enrichment" })
            #expect(enrichment.attributes["enrichment.outcome"]?.toSpanAttribute() == .string("enriched"))
            let children = tracer.finishedSpans.filter { $0.parentSpanID == enrichment.spanID }
            #expect(Set(children.map(\.operationName)) == ["db.latest_fix", "db.device_context", "places.search"])
            #expect(children.allSatisfy { $0.traceID == enrichment.traceID })
            tracer.clearAll()

            // 2. One delivery, through the engine's workers.
            _ = try await runtime.tokens.register(
                TokenRegistration(
                    deviceId: "traced", token: token64, topic: "com.example.app", environment: .sandbox,
                    registeredAt: now))
            let done = try await Self.deliver(runtime.delivery, payload: payload.json, now: now)
            #expect(done)
            #expect(state.receivedCount == 1)
            let batch = try #require(tracer.finishedSpans.first { $0.operationName == "delivery.batch" })
            #expect(batch.attributes["delivery.count"]?.toSpanAttribute() == .int64(1))
            let inBatch = tracer.finishedSpans.filter { $0.parentSpanID == batch.spanID }.map(\.operationName)
            #expect(Set(inBatch) == ["enrichment", "apns.send", "db.record_answers"])
            #expect(tracer.finishedSpans.allSatisfy { $0.traceID == batch.traceID })
        }
    }

    /// Runs the engine's workers while one push to "traced" is submitted and sent; true when it was done in time.
    static func deliver(_ delivery: DeliveryEngine, payload: JSONValue, now: Double) async throws -> Bool {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                await delivery.run()
                return true
            }
            let receipt = try await delivery.submit(
                PushDefinition(
                    id: UUID().uuidString.lowercased(), createdAt: now, payload: payload, pushType: .alert,
                    deviceIds: ["traced"]))
            let done = try await delivery.waitUntilDone(pushId: receipt.push.id, timeout: .seconds(10))
            delivery.beginShutdown()
            try await group.waitForAll()
            return done
        }
    }
}
