import Essentials
import Foundation
import MockAPNs
import Synchronization
import TestSupport
import Testing

/// The real service on PostgreSQL reached through a TCP forwarder that is killed (the database gone: connections
/// cut, new ones refused) and started again: what clients and the orchestrator see, and that nothing is lost.
@Suite("A PostgreSQL outage is bounded and visible", .serialized)
struct DatabaseOutageTests {
    static let now = Int64(Date().timeIntervalSince1970)

    /// Fix `n` goes to its own device, so that every acknowledged one can be found afterwards.
    static func fix(_ client: ServiceClient, _ n: Int) async throws -> ServiceClient.Reply {
        try await client.post(
            "/v1/devices/outage-\(n)/locations",
            json:
                #"{"locations":[{"latitude":\#(Double(n % 800) / 10),"longitude":2.3,"utc_timestamp":\#(now - 1_000 + Int64(n))}]}"#
        )
    }

    /// Fixes from `lanes` clients at once, numbered from `first`, until `stop`; returns the numbers acknowledged.
    static func load(_ client: ServiceClient, first: Int, lanes: Int = 4, stop: StopFlag) async -> [Int] {
        await withTaskGroup(of: [Int].self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    var acknowledged: [Int] = []
                    var n = first + lane
                    while !stop.isSet, !Task.isCancelled {
                        if (try? await fix(client, n))?.status == 200 { acknowledged.append(n) }
                        n += lanes
                    }
                    return acknowledged
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
    }

    /// `GET /health/ready` and how long it took.
    static func ready(_ client: ServiceClient) async throws -> (reply: ServiceClient.Reply, seconds: Double) {
        let started = Date()
        let reply = try await client.get("/health/ready")
        return (reply, Date().timeIntervalSince(started))
    }

    @Test(
        "PostgreSQL gone under load: requests answer 503 within ENRICH_DATABASE_TIMEOUT, ready 503 within 1 s probe after probe, live stays up; back: ready within seconds, every acknowledged fix stored"
    )
    func outage() async throws {
        let database = try await ForwardedPostgres()
        try database.start()
        defer { database.cut() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dbout-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("server.log")
        let server = try ServerProcess.start(
            database: directory.appendingPathComponent("unused.sqlite").path,
            environment: ["ENRICH_DATABASE_URL": database.url, "ENRICH_DATABASE_TIMEOUT": "2"],
            logFile: log)
        defer { server.kill9() }
        let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
        var acknowledged: [Int] = []
        for n in 0..<20 where try await Self.fix(client, n).status == 200 { acknowledged.append(n) }
        #expect(acknowledged.count == 20)
        #expect(try await client.get("/health/ready").status == 200)

        // Load runs through the outage and the return.
        let stop = StopFlag()
        async let loaded = Self.load(client, first: 1_000, stop: stop)
        try await Task.sleep(for: .milliseconds(300))
        database.cut()
        let started = Date()
        let refused = try await Self.fix(client, 100)
        let took = Date().timeIntervalSince(started)
        #expect(refused.status == 503, "\(refused.text)")
        #expect(refused.json?["error"]?["reason"] == .string("database_unavailable"))
        #expect(refused.headers["retry-after"] == "5")
        #expect(took < 4, "answered after \(took) s, the bound is 2 s")
        // Probe after probe, as an orchestrator does: each answered 503 with its reason within its 1 s timeout.
        for probe in 0..<6 {
            let (ready, seconds) = try await Self.ready(client)
            #expect(ready.status == 503, "probe \(probe): \(ready.text)")
            #expect(ready.json?["reason"] == .string("database_unavailable"), "probe \(probe): \(ready.text)")
            #expect(seconds < 1, "probe \(probe) answered after \(seconds) s")
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(try await client.get("/health/live").status == 200)

        try database.start()
        let back = Date()
        var readyAgain: Double?
        while readyAgain == nil, Date().timeIntervalSince(back) < 30 {
            let (ready, seconds) = try await Self.ready(client)
            #expect(seconds < 1, "a probe answered after \(seconds) s")
            if ready.status == 200 {
                readyAgain = Date().timeIntervalSince(back)
            } else {
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        let recovered = try #require(readyAgain, "ready never answered 200 again")
        #expect(recovered < 10, "ready again \(recovered) s after the database's return")
        try await Task.sleep(for: .milliseconds(500))
        stop.set()
        acknowledged += await loaded
        #expect(acknowledged.count > 20, "the load got some fixes acknowledged after the return")
        // Every acknowledged fix is stored: each device's last fix is the one it was sent.
        var missing: [Int] = []
        for n in acknowledged {
            let last = try await client.get("/v1/devices/outage-\(n)/location")
            if last.json?["utc_timestamp"] != .int(Self.now - 1_000 + Int64(n)) { missing.append(n) }
        }
        #expect(
            missing.isEmpty,
            "\(missing.count) of \(acknowledged.count) acknowledged fixes not found: \(missing.prefix(10))")
        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.contains("request refused: storage outage"), "\(text.suffix(1_500))")
        // One line when it is lost, one when it is back.
        let transitions = text.split(separator: "\n").filter {
            $0.contains("storage outage: requests that need the database") || $0.contains("storage back")
        }
        #expect(
            text.components(separatedBy: "storage outage: requests that need the database").count - 1 == 1,
            "\(transitions.joined(separator: "\n"))")
        #expect(text.contains("storage back: requests are served again"))
    }

    @Test("PostgreSQL gone for 3 s during delivery: every delivery ends delivered once it is back, none failed")
    func duringDelivery() async throws {
        let database = try await ForwardedPostgres()
        try database.start()
        defer { database.cut() }
        try await withMock { mock, state in
            let setup = try DeliveryDurabilityTests.Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            var environment = setup.environment
            environment["ENRICH_DATABASE_URL"] = database.url
            environment["ENRICH_DATABASE_TIMEOUT"] = "2"
            environment["ENRICH_DELIVERY_LEASE"] = "2"
            let count = 300
            for index in 0..<count {
                state.script(
                    FailureScript(status: 200, delayMilliseconds: 100), for: DeliveryDurabilityTests.token(index, 0))
            }
            let log = setup.directory.appendingPathComponent("server.log")
            let server = try ServerProcess.start(
                database: setup.directory.appendingPathComponent("unused.sqlite").path, environment: environment,
                logFile: log)
            defer { server.kill9() }
            let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
            for index in 0..<count {
                let reply = try await client.put(
                    "/v1/devices/d-\(index)/apns-tokens/\(DeliveryDurabilityTests.token(index, 0))",
                    json: #"{"topic":"com.example.app","environment":"sandbox"}"#)
                #expect(reply.status == 201)
            }
            let ids = (0..<count).map { #""d-\#($0)""# }.joined(separator: ",")
            let accepted = try await client.post(
                "/v1/push", json: #"{"device_ids":[\#(ids)],"payload":{"aps":{"alert":"hi"}},"wait":false}"#)
            #expect(accepted.status == 202)
            let pushId = try #require(accepted.json?["push_id"]?.stringValue)
            try await DeliveryDurabilityTests.waitForReceived(state, atLeast: 60)
            database.cut()
            try await Task.sleep(for: .seconds(3))
            try database.start()
            var report = try await client.get("/v1/push/\(pushId)")
            let deadline = Date().addingTimeInterval(60)
            while report.json?["done"] != .bool(true), Date() < deadline {
                try await Task.sleep(for: .milliseconds(200))
                report = try await client.get("/v1/push/\(pushId)")
            }
            let logTail = String(((try? String(contentsOf: log, encoding: .utf8)) ?? "").suffix(3000))
            #expect(report.json?["done"] == .bool(true), "\(report.text.prefix(500))\nserver log:\n\(logTail)")
            #expect(report.json?["counts"]?["delivered"] == .int(Int64(count)))
            #expect(report.json?["counts"]?["failed"] == .int(0))
            let received = Set(state.receivedPushes.map(\.deviceToken))
            #expect(received.count == count, "every delivery reached APNs")
        }
    }
}

/// Set once, read from many tasks.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}
