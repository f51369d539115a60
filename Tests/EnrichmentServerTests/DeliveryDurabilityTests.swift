import APNsCore
import EnrichmentCore
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// The real executable delivering to the real mock, killed and restarted.
@Suite("Delivery survives kill -9 and graceful shutdown", .serialized)
struct DeliveryDurabilityTests {
    static let devices = 100
    static let tokensPerDevice = 10
    static var total: Int { devices * tokensPerDevice }
    /// Pushes in flight per lane; the engine runs 2 lanes, so at most 2 x this many are unrecorded at any time.
    static let concurrency = 50

    static func token(_ device: Int, _ index: Int) -> String {
        let hex = String(device * 1000 + index, radix: 16)
        return "d0" + String(repeating: "0", count: 62 - hex.count) + hex
    }

    /// Files and settings for a server that sends to `mock`.
    struct Setup {
        let directory: URL
        let database: String
        let environment: [String: String]

        init(mock: String) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("deliver-\(UUID().uuidString)")
            database = directory.appendingPathComponent("db.sqlite").path
            let (key, ca) = try writeMockCredentials(into: directory)
            environment = [
                "ENRICH_APNS_KEY_FILE": key, "ENRICH_APNS_KEY_ID": "KEYID12345", "ENRICH_APNS_TEAM_ID": "TEAMID6789",
                "ENRICH_APNS_CA": ca, "ENRICH_APNS_SANDBOX_URL": mock, "ENRICH_APNS_PRODUCTION_URL": mock,
                "ENRICH_APNS_CONCURRENCY": "\(DeliveryDurabilityTests.concurrency)",
            ]
        }
    }

    /// Registers every token (8 requests at a time) and commits one push to all devices; returns its id.
    static func commitPush(_ client: ServiceClient) async throws -> String {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<8 {
                group.addTask {
                    for device in stride(from: lane, to: devices, by: 8) {
                        for index in 0..<tokensPerDevice {
                            let reply = try await client.put(
                                "/v1/devices/dev-\(device)/apns-tokens/\(token(device, index))",
                                json: #"{"topic":"com.example.app","environment":"sandbox"}"#)
                            #expect(reply.status == 201)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let ids = (0..<devices).map { #""dev-\#($0)""# }.joined(separator: ",")
        let now = Int64(Date().timeIntervalSince1970)
        let accepted = try await client.post(
            "/v1/push",
            json: #"{"device_ids":[\#(ids)],"payload":{"aps":{"alert":"hello","timestamp":\#(now)}},"wait":false}"#)
        #expect(accepted.status == 202)
        #expect(accepted.json?["deliveries"] == .int(Int64(total)))
        return try #require(accepted.json?["push_id"]?.stringValue)
    }

    /// Waits until the mock has received at least `count` pushes.
    static func waitForReceived(_ state: MockAPNsState, atLeast count: Int, seconds: Double = 60) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while state.receivedCount < count, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }

    /// Waits until every token has been received at least once; returns pushes received per token.
    static func waitForEveryToken(_ state: MockAPNsState, seconds: Double = 90) async throws -> [String: Int] {
        let deadline = Date().addingTimeInterval(seconds)
        var counts: [String: Int] = [:]
        repeat {
            counts = Dictionary(state.receivedPushes.map { ($0.deviceToken, 1) }, uniquingKeysWith: +)
            if counts.count >= total { break }
            try await Task.sleep(for: .milliseconds(50))
        } while Date() < deadline
        return counts
    }

    static func slowEveryToken(_ state: MockAPNsState) {
        for device in 0..<devices {
            for index in 0..<tokensPerDevice {
                state.script(FailureScript(status: 200, delayMilliseconds: 100), for: token(device, index))
            }
        }
    }

    @Test("kill -9 with 1,000 committed deliveries pending: after a restart every one is sent, few twice")
    func kill9() async throws {
        try await withMock { mock, state in
            let setup = try Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            Self.slowEveryToken(state)
            let first = try ServerProcess.start(database: setup.database, environment: setup.environment)
            _ = try await Self.commitPush(ServiceClient(base: "http://127.0.0.1:\(first.port)"))
            try await Self.waitForReceived(state, atLeast: 150)
            first.kill9()
            let beforeRestart = state.receivedCount
            #expect(beforeRestart < Self.total, "the kill must come while deliveries are still pending")

            state.clearScripts()
            let second = try ServerProcess.start(database: setup.database, environment: setup.environment)
            defer { second.kill9() }
            let counts = try await Self.waitForEveryToken(state)
            #expect(counts.count == Self.total, "every committed delivery reaches APNs after the restart")
            let duplicates = counts.values.reduce(0, +) - counts.count
            // Only deliveries claimed and not yet recorded at the kill can go twice: 2 lanes x Self.concurrency.
            #expect(duplicates <= 2 * Self.concurrency, "\(duplicates) deliveries sent twice")
        }
    }

    @Test("two nodes on PostgreSQL: when one is killed, the other sends its claimed deliveries after the lease")
    func nodeTakeover() async throws {
        let url = try await PostgresTestDatabase.makeURL()
        try await withMock { mock, state in
            let setup = try Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            var environment = setup.environment
            environment["ENRICH_DATABASE_URL"] = url
            environment["ENRICH_DELIVERY_LEASE"] = "2"
            Self.slowEveryToken(state)
            let first = try ServerProcess.start(database: setup.database, environment: environment)
            _ = try await Self.commitPush(ServiceClient(base: "http://127.0.0.1:\(first.port)"))
            try await Self.waitForReceived(state, atLeast: 150)
            first.kill9()
            #expect(state.receivedCount < Self.total)

            state.clearScripts()
            // Another node (not a restart of the first: it does not release anyone's claims at start).
            let second = try ServerProcess.start(
                database: setup.directory.appendingPathComponent("unused.sqlite").path, environment: environment)
            defer { second.kill9() }
            let counts = try await Self.waitForEveryToken(state)
            #expect(counts.count == Self.total, "the dead node's claims are sent by the other node")
            let duplicates = counts.values.reduce(0, +) - counts.count
            #expect(duplicates <= 2 * Self.concurrency, "\(duplicates) deliveries sent twice")
        }
    }

    @Test("graceful shutdown finishes what it claimed and leaves the rest committed: no push is sent twice")
    func gracefulShutdown() async throws {
        try await withMock { mock, state in
            let setup = try Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            Self.slowEveryToken(state)
            let first = try ServerProcess.start(database: setup.database, environment: setup.environment)
            let pushId = try await Self.commitPush(ServiceClient(base: "http://127.0.0.1:\(first.port)"))
            try await Self.waitForReceived(state, atLeast: 150)
            first.terminate()
            #expect(first.process.terminationStatus == 0)
            #expect(state.receivedCount < Self.total)

            state.clearScripts()
            let second = try ServerProcess.start(database: setup.database, environment: setup.environment)
            defer { second.kill9() }
            let counts = try await Self.waitForEveryToken(state)
            #expect(counts.count == Self.total)
            #expect(counts.values.allSatisfy { $0 == 1 }, "a graceful stop records every answer it got")
            let client = ServiceClient(base: "http://127.0.0.1:\(second.port)")
            var report = try await client.get("/v1/push/\(pushId)")
            let deadline = Date().addingTimeInterval(10)
            while report.json?["done"] != .bool(true), Date() < deadline {
                try await Task.sleep(for: .milliseconds(50))
                report = try await client.get("/v1/push/\(pushId)")
            }
            #expect(report.json?["counts"]?["delivered"] == .int(Int64(Self.total)))
        }
    }
}
