import APNsCore
import Delivery
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Pushes of any size (issue 48) through the service, on both stores: everyone as an audience, pacing, cancel,
/// pages of deliveries, retention. The 50,000-device runs with kill -9 are `BigPushDurabilityTests` (the binary).
@Suite("Pushes at any size: everyone, pacing, cancel, pages, retention")
struct BigPushTests {
    static func databaseURL(_ backend: Backend) async throws -> Secret? {
        backend == .postgres ? Secret(try await PostgresTestDatabase.makeURL()) : nil
    }

    /// Registers `count` devices `<prefix><n>` with one sandbox token each (token label `base + n`).
    static func registerDevices(
        _ client: ServiceClient, prefix: String, count: Int, base: Int, headers: [String: String] = [:]
    ) async throws {
        for index in 0..<count {
            let reply = try await register(client, "\(prefix)\(index)", deviceToken(base + index), headers: headers)
            #expect(reply.status == 201 || reply.status == 200, "\(reply.text)")
        }
    }

    static func waitDone(_ client: ServiceClient, _ id: String, seconds: Double = 30) async throws -> JSONValue? {
        let reply = try await client.get("/v1/push/\(id)?wait=\(Int(seconds))&results=false")
        return reply.json
    }

    @Test(
        "{\"all\": []} is every device of the app; an all of only nots is everyone but them",
        arguments: Backend.allCases)
    func everyone(backend: Backend) async throws {
        let url = try await Self.databaseURL(backend)
        try await withDelivery({ $0.databaseURL = url }) { client, sandbox, _ in
            try await Self.registerDevices(client, prefix: "e", count: 60, base: 1_000)
            // Tagged devices, to take away.
            for index in 0..<10 {
                let reply = try await client.put(
                    "/v1/devices/e\(index)/apns-tokens/\(deviceToken(1_000 + index))",
                    json: #"{"topic":"com.example.app","environment":"sandbox","tags":["at:home"]}"#)
                #expect(reply.status == 200, "\(reply.text)")
            }
            let all = try await client.post(
                "/v1/push",
                json: #"{"audience":{"all":[]},"enrich":false,"payload":{"aps":{"alert":"everyone"}},"wait":true}"#)
            #expect(all.status == 200, "\(all.text)")
            #expect(all.json?["summary"]?["matched"] == .int(60), "\(all.text)")
            #expect(all.json?["counts"]?["delivered"] == .int(60))
            let but = try await client.post(
                "/v1/push",
                json:
                    #"{"audience":{"all":[{"not":{"tags":["at:home"]}}]},"enrich":false,"payload":{"aps":{"alert":"but"}},"wait":true}"#
            )
            #expect(but.status == 200, "\(but.text)")
            #expect(but.json?["counts"]?["delivered"] == .int(50), "\(but.text)")
            let received = sandbox.receivedPushes
            let everyoneTokens = Set(
                received.filter { String(decoding: $0.request.payload, as: UTF8.self).contains("everyone") }.map(
                    \.request.deviceToken))
            let butTokens = Set(
                received.filter { String(decoding: $0.request.payload, as: UTF8.self).contains("\"but\"") }.map(
                    \.request.deviceToken))
            #expect(everyoneTokens == Set((0..<60).map { deviceToken(1_000 + $0) }))
            #expect(butTokens == Set((10..<60).map { deviceToken(1_000 + $0) }))
            #expect(received.count == 110)
        }
    }

    @Test(
        "a paced push goes out at its rate, says when it ends, and counts what is still ahead",
        arguments: Backend.allCases)
    func paced(backend: Backend) async throws {
        let url = try await Self.databaseURL(backend)
        try await withDelivery({ $0.databaseURL = url }) { client, sandbox, _ in
            try await Self.registerDevices(client, prefix: "p", count: 40, base: 2_000)
            let ids = (0..<40).map { #""p\#($0)""# }.joined(separator: ",")
            let started = Date().timeIntervalSince1970
            let reply = try await client.post(
                "/v1/push",
                json: #"{"device_ids":[\#(ids)],"enrich":false,"payload":{"aps":{"alert":"paced"}},"rate":20}"#)
            #expect(reply.status == 202, "\(reply.text)")
            #expect(reply.json?["rate"]?.lenientDouble == 20)
            let id = try #require(reply.json?["push_id"]?.stringValue)
            try await Task.sleep(for: .milliseconds(500))
            let progress = try await client.get("/v1/push/\(id)")
            #expect(progress.json?["done"] == .bool(false), "\(progress.text)")
            // 40 deliveries at 20 per second: the last is due 1.95 s after the first.
            let endsAt = try #require(progress.json?["ends_at"]?.lenientDouble, "\(progress.text)")
            #expect(abs(endsAt - (started + 1.95)) < 0.5, "\(endsAt - started)")
            let scheduled = progress.json?["summary"]?["scheduled"]?.lenientDouble ?? 0
            #expect(scheduled > 10 && scheduled < 40, "\(progress.text)")
            let done = try await Self.waitDone(client, id)
            #expect(done?["counts"]?["delivered"] == .int(40))
            let times = sandbox.receivedPushes.map(\.receivedAt).sorted()
            #expect(times.count == 40)
            let spread = (times.last ?? 0) - (times.first ?? 0)
            #expect(spread > 1.5 && spread < 4, "sent over \(spread) s")
        }
    }

    @Test(
        "a cancel stops a push in flight: nothing is sent after the answer, and the counts say how many went and were cancelled",
        arguments: Backend.allCases)
    func cancelInFlight(backend: Backend) async throws {
        let url = try await Self.databaseURL(backend)
        try await withDelivery({ $0.databaseURL = url }) { client, sandbox, _ in
            try await Self.registerDevices(client, prefix: "c", count: 300, base: 3_000)
            let ids = (0..<300).map { #""c\#($0)""# }.joined(separator: ",")
            let reply = try await client.post(
                "/v1/push",
                json: #"{"device_ids":[\#(ids)],"enrich":false,"payload":{"aps":{"alert":"stop"}},"rate":100}"#)
            let id = try #require(reply.json?["push_id"]?.stringValue, "\(reply.text)")
            try await Task.sleep(for: .milliseconds(800))
            let asked = ContinuousClock.now
            let cancel = try await client.post("/v1/push/\(id)/cancel", json: "{}")
            #expect(ContinuousClock.now - asked < .milliseconds(1_500))
            #expect(cancel.status == 200, "\(cancel.text)")
            let receivedAtAnswer = sandbox.receivedCount
            let sent = try #require(cancel.json?["sent"]?.lenientDouble.map { Int($0) })
            let cancelled = try #require(cancel.json?["cancelled"]?.lenientDouble.map { Int($0) })
            #expect(cancel.json?["still_sending"] == .int(0))
            #expect(sent > 0 && sent < 300, "\(cancel.text)")
            #expect(sent + cancelled == 300, "\(cancel.text)")
            #expect(receivedAtAnswer == sent)
            try await Task.sleep(for: .seconds(1))
            #expect(sandbox.receivedCount == sent, "sent after the cancel's answer")
            let report = try await client.get("/v1/push/\(id)?results=false")
            #expect(report.json?["done"] == .bool(true), "\(report.text)")
            #expect(report.json?["counts"]?["cancelled"] == .int(Int64(cancelled)))
            #expect(report.json?["counts"]?["delivered"] == .int(Int64(sent)))
            #expect(report.json?["cancelled_at"]?.lenientDouble != nil)
        }
    }

    @Test(
        "deliveries are listed page by page with a state filter; a pending one says its last answer",
        arguments: Backend.allCases)
    func pagesAndWhyPending(backend: Backend) async throws {
        let url = try await Self.databaseURL(backend)
        try await withDelivery({
            $0.databaseURL = url
            $0.delivery.retryDelay = 30
            $0.delivery.waitTimeout = 2
        }) { client, sandbox, _ in
            try await Self.registerDevices(client, prefix: "g", count: 25, base: 4_000)
            for index in [3, 7, 11] {
                sandbox.script(FailureScript(status: 429, reason: "TooManyRequests"), for: deviceToken(4_000 + index))
            }
            let ids = (0..<25).map { #""g\#($0)""# }.joined(separator: ",")
            let reply = try await client.post(
                "/v1/push",
                json: #"{"device_ids":[\#(ids)],"enrich":false,"payload":{"aps":{"alert":"x"}},"wait":true}"#)
            #expect(reply.status == 202, "\(reply.text)")
            let id = try #require(reply.json?["push_id"]?.stringValue)
            // Why is it still pending? The report groups the last answers; the page lists them per delivery.
            let progress = try await client.get("/v1/push/\(id)")
            #expect(progress.json?["waiting"]?[0]?["reason"] == .string("TooManyRequests"), "\(progress.text)")
            #expect(progress.json?["waiting"]?[0]?["deliveries"] == .int(3))
            let pending = try await client.get("/v1/push/\(id)/deliveries?state=pending")
            guard case .array(let items)? = pending.json?["deliveries"] else {
                Issue.record("no deliveries: \(pending.text)")
                return
            }
            #expect(Set(items.compactMap { $0["device_id"]?.stringValue }) == ["g3", "g7", "g11"])
            #expect(items.allSatisfy { $0["status"] == .int(429) && $0["reason"] == .string("TooManyRequests") })
            // Pages of 10 with the cursor: every delivery once, in order.
            var seen: [String] = []
            var cursor: String?
            repeat {
                let page = try await client.get(
                    "/v1/push/\(id)/deliveries?limit=10" + (cursor.map { "&cursor=\($0)" } ?? ""))
                guard case .array(let rows)? = page.json?["deliveries"] else { break }
                seen += rows.compactMap { $0["device_id"]?.stringValue }
                cursor = page.json?["next_cursor"]?.stringValue
            } while cursor != nil
            #expect(seen == (0..<25).map { "g\($0)" })
            let bad = try await client.get("/v1/push/\(id)/deliveries?state=sent")
            #expect(bad.status == 400)
            #expect(bad.json?["error"]?["field"] == .string("state"))
        }
    }

    @Test(
        "a push past the retention period is deleted with its deliveries; the list pages", arguments: Backend.allCases)
    func retention(backend: Backend) async throws {
        let url = try await Self.databaseURL(backend)
        try await withDelivery({
            $0.databaseURL = url
            $0.delivery.retention = 2
        }) { client, _, _ in
            try await Self.registerDevices(client, prefix: "r", count: 3, base: 5_000)
            var ids: [String] = []
            for _ in 0..<3 {
                let reply = try await client.post(
                    "/v1/push",
                    json: #"{"device_ids":["r0","r1","r2"],"enrich":false,"payload":{"aps":{"alert":"r"}},"wait":true}"#
                )
                #expect(reply.status == 200, "\(reply.text)")
                ids.append(try #require(reply.json?["push_id"]?.stringValue))
            }
            let page = try await client.get("/v1/push?state=all&limit=2")
            #expect(page.json?["pushes"]?[0]?["push_id"]?.stringValue == ids[2], "\(page.text)")
            let next = try #require(page.json?["next_cursor"]?.stringValue)
            let rest = try await client.get("/v1/push?state=all&limit=2&cursor=\(next)")
            #expect(rest.json?["pushes"]?[0]?["push_id"]?.stringValue == ids[0], "\(rest.text)")
            #expect(rest.json?["next_cursor"] == nil, "the last page has no next cursor")
            // Kept for 2 s after it was made, then deleted (the retention looks every 0.2 s).
            var gone = false
            for _ in 0..<50 where !gone {
                try await Task.sleep(for: .milliseconds(200))
                gone = try await client.get("/v1/push/\(ids[0])").status == 404
            }
            #expect(gone)
            // The two made after it go the same way, within a look or two.
            var listed = try await client.get("/v1/push?state=all")
            for _ in 0..<20 where listed.json?["pushes"] != .array([]) {
                try await Task.sleep(for: .milliseconds(200))
                listed = try await client.get("/v1/push?state=all")
            }
            #expect(listed.json?["pushes"] == .array([]), "\(listed.text)")
        }
    }
}
