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
    /// Pushes in flight per lane while a node is killed again and again: each kill leaves up to 2 x this many on the
    /// wire, which the mock still receives, so each round's tokens are at most its step plus two such bursts.
    static let killConcurrency = 10

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

    /// Distinct tokens the mock has received.
    static func uniqueCount(_ state: MockAPNsState) -> Int { Set(state.receivedPushes.map(\.deviceToken)).count }

    /// Waits until the mock has received at least `count` distinct tokens.
    static func waitForUnique(_ state: MockAPNsState, atLeast count: Int, seconds: Double = 60) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while uniqueCount(state) < count, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
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

    /// Kills the delivering node `kills` times (each time after it sent `step` more), starting the next one each
    /// time (`nextDatabase(k)` is its SQLite file: the same file is a restart, another with PostgreSQL is another
    /// node), then lets a last node finish. Checks that nothing is lost, that every push sent more than once is
    /// reported as resent and counted as an attempt, and that the duplicates stay within what was on the wire at
    /// each kill (2 lanes x `killConcurrency` in flight, plus 20 ms of answers not yet written).
    static func killRepeatedly(
        _ state: MockAPNsState, environment: [String: String], kills: Int, nextDatabase: (Int) -> String
    ) async throws {
        var environment = environment
        environment["ENRICH_APNS_CONCURRENCY"] = "\(Self.killConcurrency)"
        Self.slowEveryToken(state)
        var node = try ServerProcess.start(database: nextDatabase(0), environment: environment)
        let pushId = try await Self.commitPush(ServiceClient(base: "http://127.0.0.1:\(node.port)"))
        // Every kill lands while deliveries are pending: the steps, with the bursts each round may add (up to 4 x
        // `killConcurrency`: what was on the wire at the kill, and the next node's first sends), leave the last 200
        // for the node that finishes.
        let step = (Self.total - 200) / kills - 4 * Self.killConcurrency
        var killed = 0
        for round in 1...kills {
            // Counted by distinct tokens, not pushes (resends would count twice).
            let before = Self.uniqueCount(state)
            try await Self.waitForUnique(state, atLeast: before + step)
            // Pending means some token has not been received yet.
            let unique = Self.uniqueCount(state)
            node.kill9()
            if unique < Self.total { killed += 1 }
            if round == kills { state.clearScripts() }
            node = try ServerProcess.start(database: nextDatabase(round), environment: environment)
        }
        defer { node.kill9() }
        #expect(killed == kills, "only \(killed) of \(kills) kills came while deliveries were pending")
        let counts = try await Self.waitForEveryToken(state)
        #expect(counts.count == Self.total, "every committed delivery reaches APNs")
        let duplicates = counts.values.reduce(0, +) - counts.count
        let bound = killed * (2 * Self.killConcurrency + 25)
        #expect(duplicates <= bound, "\(duplicates) deliveries sent twice after \(killed) kills (bound \(bound))")

        let client = ServiceClient(base: "http://127.0.0.1:\(node.port)")
        var report = try await client.get("/v1/push/\(pushId)")
        let deadline = Date().addingTimeInterval(30)
        while report.json?["done"] != .bool(true), Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
            report = try await client.get("/v1/push/\(pushId)")
        }
        #expect(report.json?["counts"]?["delivered"] == .int(Int64(Self.total)))
        var uncounted = 0
        var unreported = 0
        var reported = 0
        var checked = 0
        guard case .array(let devices)? = report.json?["devices"] else {
            Issue.record("the final report lists no devices: \(report.text.prefix(500))")
            return
        }
        for device in devices {
            guard case .array(let deliveries)? = device["deliveries"] else {
                Issue.record("a device without deliveries: \(device)")
                continue
            }
            for delivery in deliveries {
                let sent = counts[delivery["token"]?.stringValue ?? ""] ?? 0
                let attempts: Int = if case .int(let n)? = delivery["attempts"] { Int(n) } else { 0 }
                let resent = delivery["resent_after_takeover"] == .bool(true)
                if resent { reported += 1 }
                if attempts < sent { uncounted += 1 }
                if sent > 1, !resent { unreported += 1 }
                checked += 1
            }
        }
        #expect(checked == Self.total, "the report lists \(checked) of \(Self.total) deliveries")
        #expect(uncounted == 0, "\(uncounted) deliveries were sent more often than their attempts say")
        #expect(unreported == 0, "\(unreported) deliveries sent twice do not say resent_after_takeover")
        #expect(reported >= counts.values.filter { $0 > 1 }.count)
    }

    @Test("kill -9 ten times during delivery (SQLite, restarts): nothing lost, every resend counted and reported")
    func kill9() async throws {
        try await withMock { mock, state in
            let setup = try Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            try await Self.killRepeatedly(state, environment: setup.environment, kills: 10) { _ in setup.database }
        }
    }

    @Test("kill -9 ten times during delivery (PostgreSQL, another node takes over after the lease)")
    func nodeTakeover() async throws {
        let url = try await PostgresTestDatabase.makeURL()
        try await withMock { mock, state in
            let setup = try Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            var environment = setup.environment
            environment["ENRICH_DATABASE_URL"] = url
            environment["ENRICH_DELIVERY_LEASE"] = "2"
            // Each start is another node (its own unused SQLite path): it releases nobody's claims at start.
            try await Self.killRepeatedly(state, environment: environment, kills: 10) { round in
                setup.directory.appendingPathComponent("unused-\(round).sqlite").path
            }
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
