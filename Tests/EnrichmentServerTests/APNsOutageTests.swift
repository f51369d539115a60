import Essentials
import Foundation
import TestSupport
import Testing

/// The real service delivering to the real mock APNs as a process of its own (`push-sender mock-apns`), which is
/// killed with SIGKILL mid-push and started again on the same port: an APNs outage as a node sees it.
@Suite("Deliveries wait out an APNs outage", .serialized)
struct APNsOutageTests {
    static let devices = 2_000
    static let concurrency = 50

    static func token(_ index: Int) -> String { String(format: "%064x", 0xA0_0000 + index) }

    /// The mock as a process on `port` (its throwaway CA kept in `certs`, so a restart is trusted the same).
    struct MockProcess {
        let process: Process

        static func start(port: Int, certs: URL, key: String, scripts: URL) throws -> MockProcess {
            let process = Process()
            guard let executable = builtExecutable(named: "push-sender") else {
                throw TestEnvironmentError("push-sender is not built next to the tests")
            }
            process.executableURL = executable
            process.arguments = [
                "mock-apns", "--port", "\(port)", "--certs-out", certs.path, "--auth-key", key, "--key-id",
                "KEYID12345", "--team-id", "TEAMID6789", "--scripts", scripts.path, "--log-level", "error",
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Listening once the port accepts a connection.
            LoopbackPort.waitUntilListening(port, seconds: 30)
            return MockProcess(process: process)
        }

        func kill9() {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Runs a 2,000-device push, kills the peer once `killAt` are delivered, and starts it again after `down`
    /// seconds (never, when nil); returns the final report, what the log said, the deliveries counted before the
    /// kill and what the second peer received.
    static func outage(down: Double?, maximumAge: Double?) async throws -> (
        reports: [ServiceClient.Reply], log: String, deliveredBeforeKill: Int
    ) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (key, _) = try writeMockCredentials(into: directory)
        let certs = directory.appendingPathComponent("mock")
        // Each answer takes 100 ms, so the push is still under way when the peer dies.
        let slow = directory.appendingPathComponent("slow.json")
        let scripts = (0..<devices).map { #""\#(token($0))":{"status":200,"delay_ms":100}"# }
        try ("{" + scripts.joined(separator: ",") + "}").write(to: slow, atomically: true, encoding: .utf8)
        let fast = directory.appendingPathComponent("fast.json")
        try "{}".write(to: fast, atomically: true, encoding: .utf8)
        let port = try LoopbackPort.free()
        var mock = try MockProcess.start(port: port, certs: certs, key: key, scripts: slow)
        defer { mock.kill9() }

        var environment = [
            "ENRICH_APNS_KEY_FILE": key, "ENRICH_APNS_KEY_ID": "KEYID12345", "ENRICH_APNS_TEAM_ID": "TEAMID6789",
            "ENRICH_APNS_CA": certs.appendingPathComponent("ca.pem").path,
            "ENRICH_APNS_SANDBOX_URL": "https://127.0.0.1:\(port)",
            "ENRICH_APNS_PRODUCTION_URL": "https://127.0.0.1:\(port)",
            "ENRICH_APNS_CONCURRENCY": "\(concurrency)", "ENRICH_APNS_RETRY_DELAY": "0.5",
            "ENRICH_APNS_PROBE_INTERVAL": "2",
        ]
        if let maximumAge { environment["ENRICH_DELIVERY_MAX_AGE"] = "\(maximumAge)" }
        let log = directory.appendingPathComponent("server.log")
        let server = try ServerProcess.start(
            database: directory.appendingPathComponent("db.sqlite").path, environment: environment, logFile: log)
        defer { server.kill9() }
        // The server made SQLite's process-wide settings before SQLite first ran (else it warns at start).
        #expect(!(try String(contentsOf: log, encoding: .utf8)).contains("process-wide settings"))
        let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<8 {
                group.addTask {
                    for index in stride(from: lane, to: devices, by: 8) {
                        let reply = try await client.put(
                            "/v1/devices/o-\(index)/apns-tokens/\(token(index))",
                            json: #"{"topic":"com.example.app","environment":"sandbox"}"#)
                        #expect(reply.status == 201)
                    }
                }
            }
            try await group.waitForAll()
        }
        var pushIds: [String] = []
        for start in stride(from: 0, to: devices, by: 1_000) {
            let slice = (start..<start + 1_000).map { #""o-\#($0)""# }.joined(separator: ",")
            let accepted = try await client.post(
                "/v1/push",
                json: #"{"device_ids":[\#(slice)],"payload":{"aps":{"alert":"hello"}},"wait":false}"#)
            #expect(accepted.status == 202)
            pushIds.append(try #require(accepted.json?["push_id"]?.stringValue))
        }
        func delivered() async throws -> Int {
            var total = 0
            for id in pushIds {
                if case .int(let n)? = try await client.get("/v1/push/\(id)").json?["counts"]?["delivered"] {
                    total += Int(n)
                }
            }
            return total
        }
        // The peer dies a quarter of the way through.
        let killDeadline = Date().addingTimeInterval(60)
        while try await delivered() < devices / 4, Date() < killDeadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        mock.kill9()
        let before = try await delivered()
        #expect(before < devices, "the push ended before the peer died")
        if let down {
            try await Task.sleep(for: .seconds(down))
            mock = try MockProcess.start(port: port, certs: certs, key: key, scripts: fast)
        }
        // Every delivery ends: delivered once the peer is back, or expired once the maximum age has passed.
        let deadline = Date().addingTimeInterval(90)
        var reports: [ServiceClient.Reply] = []
        repeat {
            reports = []
            for id in pushIds { reports.append(try await client.get("/v1/push/\(id)")) }
            if reports.allSatisfy({ $0.json?["done"] == .bool(true) }) { break }
            try await Task.sleep(for: .milliseconds(200))
        } while Date() < deadline
        #expect(reports.allSatisfy { $0.json?["done"] == .bool(true) }, "a delivery never became final")
        return (reports, (try? String(contentsOf: log, encoding: .utf8)) ?? "", before)
    }

    static func count(_ replies: [ServiceClient.Reply], _ state: String) -> Int {
        replies.reduce(0) { total, reply in
            if case .int(let n)? = reply.json?["counts"]?[state] { return total + Int(n) }
            return total
        }
    }

    /// Deliveries whose `attempts` is more than 1 (sent again after the peer may have received them).
    static func resent(_ replies: [ServiceClient.Reply]) -> Int {
        var resent = 0
        for reply in replies {
            guard case .array(let devices)? = reply.json?["devices"] else { continue }
            for device in devices {
                guard case .array(let deliveries)? = device["deliveries"] else { continue }
                for delivery in deliveries {
                    if case .int(let n)? = delivery["attempts"], n > 1 { resent += 1 }
                }
            }
        }
        return resent
    }

    @Test("the peer down 30 s mid-push: nothing fails, every delivery is delivered, the operator is told")
    func downThirtySeconds() async throws {
        let (reports, log, before) = try await Self.outage(down: 30, maximumAge: nil)
        #expect(before > 0)
        #expect(Self.count(reports, "delivered") == Self.devices)
        #expect(Self.count(reports, "failed") == 0)
        // Only what was on the wire when the peer died (two lanes of 50) is sent again, and counted.
        #expect(Self.resent(reports) <= 2 * Self.concurrency + 25, "\(Self.resent(reports)) sent again")
        #expect(log.contains("APNs unreachable: sending paused"), "\(log.suffix(2_000))")
        #expect(log.contains("APNs reachable again: sending resumed"))
        #expect(!log.contains("ended failed"))
    }

    @Test("the peer down longer than the maximum age: the waiting deliveries end expired, none failed")
    func downPastMaximumAge() async throws {
        let (reports, log, before) = try await Self.outage(down: nil, maximumAge: 8)
        #expect(Self.count(reports, "failed") == 0)
        #expect(Self.count(reports, "expired") > 0)
        #expect(Self.count(reports, "delivered") + Self.count(reports, "expired") == Self.devices)
        #expect(Self.count(reports, "delivered") >= before)
        #expect(log.contains("APNs unreachable: sending paused"))
        #expect(log.contains("deliveries of a push ended expired"), "\(log.suffix(2_000))")
        #expect(!log.contains("ended failed"))
    }
}
