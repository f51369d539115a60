import APNsCore
import Delivery
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// A push to a list longer than one request's 1,000 device ids (issue 48, item 1): an open push given its devices
/// in further requests, on both stores, and push-sender's `--devices-file` doing it from a file.
@Suite("Open pushes: a list of any length, 1,000 ids a request")
struct OpenPushTests {
    static func ids(_ prefix: String, _ range: Range<Int>) -> String {
        range.map { #""\#(prefix)\#($0)""# }.joined(separator: ",")
    }

    @Test(
        "2,100 devices in three requests: one push, each device sent to once, a retried id added once, closed at the end",
        arguments: Backend.allCases)
    func manyRequests(backend: Backend) async throws {
        let url = try await BigPushTests.databaseURL(backend)
        try await withDelivery({ $0.databaseURL = url }) { client, sandbox, _ in
            try await BigPushTests.registerDevices(client, prefix: "o", count: 2_100, base: 10_000)
            let opened = try await client.post(
                "/v1/push",
                json:
                    #"{"open":true,"device_ids":[\#(Self.ids("o", 0..<1_000))],"enrich":false,"payload":{"aps":{"alert":"open"}}}"#
            )
            #expect(opened.status == 202, "\(opened.text)")
            #expect(opened.json?["open"] == .bool(true))
            #expect(opened.json?["added"] == .int(1_000))
            #expect(opened.json?["deliveries"] == .int(1_000))
            let id = try #require(opened.json?["push_id"]?.stringValue)
            let progress = try await client.get("/v1/push/\(id)?results=false")
            #expect(progress.json?["open"] == .bool(true), "\(progress.text)")
            #expect(progress.json?["done"] == .bool(false), "an open push is not done, even once its deliveries are")
            // The second request repeats 50 of the first (a retry after a lost answer): they are not added again.
            let second = try await client.post(
                "/v1/push/\(id)/devices", json: #"{"device_ids":[\#(Self.ids("o", 950..<1_950))]}"#)
            #expect(second.status == 200, "\(second.text)")
            #expect(second.json?["added"] == .int(950))
            #expect(second.json?["already"]?[49] != nil && second.json?["already"]?[50] == nil, "50 already in it")
            #expect(second.json?["matched"] == .int(1_950))
            // The last, with an unknown device, closes the push.
            let last = try await client.post(
                "/v1/push/\(id)/devices",
                json: #"{"device_ids":[\#(Self.ids("o", 1_950..<2_100)),"nobody"],"close":true}"#)
            #expect(last.status == 200, "\(last.text)")
            #expect(last.json?["open"] == .bool(false))
            #expect(last.json?["not_sent"]?[0]?["rule"] == .string("no_active_token"), "\(last.text)")
            let done = try await BigPushTests.waitDone(client, id)
            #expect(done?["done"] == .bool(true), "\(String(describing: done))")
            #expect(done?["summary"]?["matched"] == .int(2_101))
            #expect(done?["counts"]?["delivered"] == .int(2_100))
            #expect(done?["open"] == nil)
            let tokens = sandbox.receivedPushes.map(\.request.deviceToken)
            let count = tokens.count
            #expect(count == 2_100, "each device once")
            let everyToken = Set(tokens) == Set((0..<2_100).map { deviceToken(10_000 + $0) })
            #expect(everyToken, "every device's token")
            // Closed: nothing more is added.
            let late = try await client.post("/v1/push/\(id)/devices", json: #"{"device_ids":["o1"]}"#)
            #expect(late.status == 409)
            #expect(late.json?["error"]?["reason"] == .string("push_not_open"))
            #expect(sandbox.receivedCount == 2_100)
        }
    }

    @Test("open pushes say what is wrong: with an audience, unknown, not open, too many ids, past the limit")
    func refusals() async throws {
        try await withDelivery({ $0.delivery.maximumAudience = 3 }) { client, _, _ in
            try await BigPushTests.registerDevices(client, prefix: "r", count: 5, base: 20_000)
            let both = try await client.post(
                "/v1/push", json: #"{"open":true,"audience":{"all":[]},"payload":{"aps":{"alert":"x"}}}"#)
            #expect(both.status == 400)
            #expect(both.json?["error"]?["field"] == .string("open"), "\(both.text)")
            let unknown = try await client.post("/v1/push/no-such-push/devices", json: #"{"device_ids":["r1"]}"#)
            #expect(unknown.status == 404)
            #expect(unknown.json?["error"]?["reason"] == .string("push_not_found"))
            // A push made with its devices is not open.
            let plain = try await client.post(
                "/v1/push", json: #"{"device_ids":["r0"],"enrich":false,"payload":{"aps":{"alert":"x"}}}"#)
            let plainId = try #require(plain.json?["push_id"]?.stringValue, "\(plain.text)")
            let notOpen = try await client.post("/v1/push/\(plainId)/devices", json: #"{"device_ids":["r1"]}"#)
            #expect(notOpen.status == 409)
            #expect(notOpen.json?["error"]?["message"]?.stringValue?.contains("not open") == true)
            let opened = try await client.post(
                "/v1/push", json: #"{"open":true,"enrich":false,"payload":{"aps":{"alert":"x"}}}"#)
            #expect(opened.status == 202, "\(opened.text)")
            let id = try #require(opened.json?["push_id"]?.stringValue)
            #expect(opened.json?["added"] == .int(0))
            let tooMany = try await client.post(
                "/v1/push/\(id)/devices", json: #"{"device_ids":[\#(Self.ids("x", 0..<1_001))]}"#)
            #expect(tooMany.status == 400)
            #expect(tooMany.json?["error"]?["message"]?.stringValue?.contains("1000") == true, "\(tooMany.text)")
            let twice = try await client.post("/v1/push/\(id)/devices", json: #"{"device_ids":["r1","r1"]}"#)
            #expect(twice.status == 400)
            let two = try await client.post("/v1/push/\(id)/devices", json: #"{"device_ids":["r1","r2"]}"#)
            #expect(two.json?["added"] == .int(2), "\(two.text)")
            // ENRICH_MAX_PUSH_AUDIENCE is 3 here: two more would pass it, and nothing is added.
            let past = try await client.post("/v1/push/\(id)/devices", json: #"{"device_ids":["r3","r4"]}"#)
            #expect(past.status == 422)
            #expect(past.json?["error"]?["reason"] == .string("push_too_large"))
            let status = try await client.get("/v1/push/\(id)?results=false")
            #expect(status.json?["summary"]?["matched"] == .int(2))
            let closed = try await client.post("/v1/push/\(id)/close", json: "{}")
            #expect(closed.status == 200)
            #expect(closed.json?["open"] == nil)
            #expect(closed.json?["resolving"] == .bool(false), "\(closed.text)")
        }
    }

    @Test("an open push nobody closes closes itself after ENRICH_OPEN_PUSH_IDLE and is then done")
    func closesWhenIdle() async throws {
        try await withDelivery({ $0.delivery.openPushIdle = 1 }) { client, sandbox, _ in
            try await BigPushTests.registerDevices(client, prefix: "i", count: 2, base: 30_000)
            let opened = try await client.post(
                "/v1/push",
                json: #"{"open":true,"device_ids":["i0","i1"],"enrich":false,"payload":{"aps":{"alert":"idle"}}}"#)
            let id = try #require(opened.json?["push_id"]?.stringValue, "\(opened.text)")
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await client.get("/v1/push/\(id)").json?["done"] == .bool(false))
            let done = try await BigPushTests.waitDone(client, id, seconds: 10)
            #expect(done?["done"] == .bool(true), "\(String(describing: done))")
            #expect(done?["counts"]?["delivered"] == .int(2))
            #expect(sandbox.receivedCount == 2)
            let late = try await client.post("/v1/push/\(id)/devices", json: #"{"device_ids":["i0"]}"#)
            #expect(late.status == 409)
        }
    }

    @Test("push-sender push --devices-file sends one push to every id of a file of 2,500, and goes on with --push-id")
    func devicesFile() async throws {
        try await withDelivery { client, sandbox, _ in
            try await BigPushTests.registerDevices(client, prefix: "f", count: 2_500, base: 40_000)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("devices-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: file) }
            let lines = ["# every device of the campaign"] + (0..<2_500).map { "f\($0)" } + ["", "f7"]
            try lines.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
            let sent = try await runPushSender([
                "push", "--server", client.base, "--devices-file", file.path, "--no-enrich", "--json",
                "payloads/location.json",
            ])
            #expect(sent.status == 0, "\(sent.err)")
            #expect(sent.err.contains("1 device ids repeated"), "\(sent.err)")
            let report = try JSONValue.decode(Data(sent.out.utf8))
            #expect(report["summary"]?["matched"] == .int(2_500), "\(sent.out)")
            #expect(report["counts"]?["delivered"] == .int(2_500))
            #expect(report["done"] == .bool(true))
            #expect(Set(sandbox.receivedPushes.map(\.request.deviceToken)).count == 2_500)
            #expect(sandbox.receivedCount == 2_500)
            // Going on with a closed push is refused with what to do.
            let id = try #require(report["push_id"]?.stringValue)
            let again = try await runPushSender([
                "push", "--server", client.base, "--devices-file", file.path, "--push-id", id,
                "payloads/location.json",
            ])
            #expect(again.status != 0)
            #expect(again.err.contains("is not open"), "\(again.err)")
            #expect(sandbox.receivedCount == 2_500)
            let bad = try await runPushSender([
                "push", "--server", client.base, "--devices-file", "/no/such/file", "payloads/location.json",
            ])
            #expect(bad.status != 0)
            #expect(bad.err.contains("cannot read /no/such/file"))
        }
    }
}
