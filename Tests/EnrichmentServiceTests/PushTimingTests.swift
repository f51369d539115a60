import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore
import MockAPNs
import TestSupport
import Testing

/// The person's time and the honest result (issue 30): device zones and tags set at registration, scheduled
/// pushes (`send_at`, `local_time`), quiet hours, frequency caps, cancellation and receipts, over HTTP against the
/// real service and the mock APNs.
@Suite("Push timing, caps and receipts", .serialized)
struct PushTimingTests {
    static let receiptKey = "consumer-receipt-19fe"
    /// The apps of `AppsTests`, with a third app `shop` that has a default zone and a frequency cap.
    static let shop =
        #", {"id": "shop", "bundle_id": "com.c", "credential": "team-a", "time_zone": "Europe/Paris", "frequency_cap": {"max": 1, "window_s": 3600}}"#

    static func keysMember() -> String {
        let receipt =
            #"{"name":"consumer-extension","sha256":"\#(AppScopeTests.hex(receiptKey))","access":"receipt","app":"consumer"}"#
        return AppScopeTests.keysMember.replacingOccurrences(of: #""keys":["#, with: #""keys":[\#(receipt),"#)
    }

    static func withApps<T: Sendable>(
        _ adjust: @escaping @Sendable (inout ServiceConfiguration) -> Void = { _ in },
        _ body: @Sendable (ServiceClient, MockAPNsState) async throws -> T
    ) async throws -> T {
        try await AppsTests().withApps(members: keysMember(), extra: shop, adjust, body)
    }

    static func inApp(_ app: String) -> [String: String] {
        AppScopeTests.admin.merging(["Enrich-App": app]) { a, _ in a }
    }

    /// Epoch seconds now, whole.
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// Waits until `condition` holds (up to `seconds`).
    static func eventually(_ seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    @Test(
        "tags set at registration: shown, matched per app against a brute-force computation, replaced",
        arguments: Backend.allCases)
    func tags(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        try await Self.withApps({ $0.databaseURL = url.map { Secret($0) } }) { client, _ in
            var tagsOf: [String: Set<String>] = [:]
            for index in 0..<30 {
                var tags: [String] = []
                if index % 2 == 0 { tags.append("plan:pro") }
                if index % 3 == 0 { tags.append("lang:fr") }
                if index % 5 < 3 { tags.append("topic:news") }
                tagsOf["t\(index)"] = Set(tags)
                let body =
                    #"{"topic":"com.a","environment":"sandbox","tags":[\#(tags.map { "\"\($0)\"" }.joined(separator: ","))]}"#
                let reply = try await client.put(
                    "/v1/devices/t\(index)/apns-tokens/\(deviceToken(index))", json: body,
                    headers: AppScopeTests.consumer)
                #expect(reply.status == 201, "\(reply.text)")
                // The same ids in another app, every one "plan:pro": never in the consumer's audiences.
                let other = try await client.put(
                    "/v1/devices/t\(index)/apns-tokens/\(deviceToken(100 + index))",
                    json: #"{"topic":"com.b","environment":"sandbox","tags":["plan:pro","lang:fr"]}"#,
                    headers: AppScopeTests.courier)
                #expect(other.status == 201)
            }
            func preview(_ audience: String) async throws -> Set<String> {
                let reply = try await client.post(
                    "/v1/audiences/preview", json: #"{"audience":\#(audience),"sample":1000}"#,
                    headers: AppScopeTests.consumer)
                #expect(reply.status == 200, "\(audience): \(reply.text)")
                guard case .array(let items)? = reply.json?["sample"] else { return [] }
                return Set(items.compactMap(\.stringValue))
            }
            func brute(_ keep: (Set<String>) -> Bool) -> Set<String> { Set(tagsOf.filter { keep($0.value) }.keys) }
            let pro = brute { $0.contains("plan:pro") }
            #expect(try await preview(#"{"tags":["plan:pro"]}"#) == pro)
            #expect(
                try await preview(#"{"tags":["plan:pro","lang:fr"]}"#)
                    == brute { $0.contains("plan:pro") && $0.contains("lang:fr") })
            // Three tags, and the rarest given last (the store drives by the first).
            let three = brute { $0.contains("plan:pro") && $0.contains("lang:fr") && $0.contains("topic:news") }
            #expect(!three.isEmpty)
            #expect(try await preview(#"{"tags":["topic:news","plan:pro","lang:fr"]}"#) == three)
            #expect(try await preview(#"{"tags":["lang:fr","topic:news","plan:pro"]}"#) == three)
            #expect(
                try await preview(#"{"all":[{"tags":["plan:pro"]},{"not":{"tags":["lang:fr"]}}]}"#)
                    == brute { $0.contains("plan:pro") && !$0.contains("lang:fr") })
            #expect(
                try await preview(#"{"any":[{"tags":["plan:pro"]},{"tags":["lang:fr"]}]}"#)
                    == brute { $0.contains("plan:pro") || $0.contains("lang:fr") })
            // Shown with the registrations; replaced by the next registration that gives them.
            let shown = try await client.get("/v1/devices/t0/apns-tokens", headers: AppScopeTests.consumer)
            #expect(
                shown.json?["tags"] == .array([.string("lang:fr"), .string("plan:pro"), .string("topic:news")]),
                "\(shown.text)")
            let cleared = try await client.put(
                "/v1/devices/t0/apns-tokens/\(deviceToken(0))",
                json: #"{"topic":"com.a","environment":"sandbox","tags":[],"time_zone":"Asia/Kolkata"}"#,
                headers: AppScopeTests.consumer)
            #expect(cleared.status == 200)
            #expect(cleared.json?["time_zone"] == .string("Asia/Kolkata"))
            #expect(try await preview(#"{"tags":["plan:pro"]}"#) == pro.subtracting(["t0"]))
            // null clears the zone; a registration without the member leaves it.
            let kept = try await client.put(
                "/v1/devices/t0/apns-tokens/\(deviceToken(0))", json: #"{"topic":"com.a","environment":"sandbox"}"#,
                headers: AppScopeTests.consumer)
            #expect(kept.json?["time_zone"] == nil)
            let still = try await client.get("/v1/devices/t0/apns-tokens", headers: AppScopeTests.consumer)
            #expect(still.json?["time_zone"] == .string("Asia/Kolkata"))
            let zoneCleared = try await client.put(
                "/v1/devices/t0/apns-tokens/\(deviceToken(0))",
                json: #"{"topic":"com.a","environment":"sandbox","time_zone":null}"#, headers: AppScopeTests.consumer)
            #expect(zoneCleared.status == 200)
            let gone = try await client.get("/v1/devices/t0/apns-tokens", headers: AppScopeTests.consumer)
            #expect(gone.json?["time_zone"] == nil, "\(gone.text)")
            // Deleting the device takes its tags with it.
            #expect(try await client.delete("/v1/devices/t2", headers: AppScopeTests.consumer).status == 200)
            #expect(try await preview(#"{"tags":["plan:pro"]}"#) == pro.subtracting(["t0", "t2"]))
            // Mistakes name the field.
            for (body, field) in [
                (#"{"topic":"com.a","environment":"sandbox","time_zone":"EST"}"#, "time_zone"),
                (#"{"topic":"com.a","environment":"sandbox","time_zone":"Mars/Olympus"}"#, "time_zone"),
                (#"{"topic":"com.a","environment":"sandbox","tags":["two words"]}"#, "tags"),
                (#"{"topic":"com.a","environment":"sandbox","tags":"plan:pro"}"#, "tags"),
            ] {
                let reply = try await client.put(
                    "/v1/devices/t1/apns-tokens/\(deviceToken(1))", json: body, headers: AppScopeTests.consumer)
                #expect(reply.status == 400, "\(body): \(reply.text)")
                #expect(reply.json?["error"]?["field"] == .string(field), "\(body): \(reply.text)")
            }
        }
    }

    @Test(
        "send_at: the push waits in the outbox, is listed, goes out once when due, stamped then; another is cancelled")
    func scheduled() async throws {
        try await withDelivery { client, mock, _ in
            #expect(try await register(client, "a", deviceToken(1)).status == 201)
            #expect(try await register(client, "b", deviceToken(2)).status == 201)
            let soon = Self.now + 2
            let first = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["a"], payload: #"{"aps":{"alert":"soon","timestamp":"{{now}}"}}"#,
                    extra: #""enrich":false,"send_at":\#(soon)"#))
            #expect(first.status == 202, "\(first.text)")
            let later = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["b"], payload: #"{"aps":{"alert":"later"}}"#,
                    extra: #""enrich":false,"send_at":\#(Self.now + 3_600)"#))
            #expect(later.status == 202)
            let firstId = try #require(first.json?["push_id"]?.stringValue)
            let laterId = try #require(later.json?["push_id"]?.stringValue)
            let progress = try await client.get("/v1/push/\(laterId)")
            #expect(progress.json?["summary"]?["scheduled"] == .int(1), "\(progress.text)")
            let listed = try await client.get("/v1/push")
            guard case .array(let items)? = listed.json?["pushes"] else {
                Issue.record("no pushes list: \(listed.text)")
                return
            }
            // Newest first (a stable order, for pages), each with its next send time.
            let ids = items.compactMap { $0["push_id"]?.stringValue }
            #expect(ids == [laterId, firstId], "\(listed.text)")
            #expect(items.allSatisfy { $0["next_send_at"]?.lenientDouble != nil }, "\(listed.text)")
            #expect(mock.receivedCount == 0)
            // Sent when due, once.
            #expect(try await Self.eventually(15) { mock.receivedCount >= 1 })
            try await Task.sleep(for: .seconds(1))
            let received = mock.receivedPushes
            #expect(received.count == 1)
            #expect(received.first?.deviceToken == deviceToken(1))
            #expect((received.first?.receivedAt ?? 0) >= Double(soon))
            let payload = try JSONValue.decode(Data(received.first?.payload ?? []))
            let stamped = payload["aps"]?["timestamp"]?.lenientDouble ?? 0
            #expect(stamped >= Double(soon) && stamped <= Double(Self.now), "stamped when sent: \(payload)")
            let done = try await client.get("/v1/push/\(firstId)")
            #expect(done.json?["summary"]?["accepted"] == .int(1), "\(done.text)")
            // The later one, cancelled: nothing left to send, nothing sent.
            let cancel = try await client.post("/v1/push/\(laterId)/cancel", json: "{}")
            #expect(cancel.status == 200)
            #expect(cancel.json?["cancelled"] == .int(1))
            let cancelled = try await client.get("/v1/push/\(laterId)")
            #expect(cancelled.json?["done"] == .bool(true))
            #expect(cancelled.json?["counts"]?["cancelled"] == .int(1))
            #expect(cancelled.json?["summary"]?["cancelled"] == .int(1))
            #expect(try await client.get("/v1/push").json?["pushes"] == .array([]))
            #expect(mock.receivedCount == 1)
            // A send_at after the push's own expiration is refused: it would expire unsent.
            let expiring = try await client.post(
                "/v1/push",
                json: pushBody(devices: ["a"], extra: #""send_at":\#(Self.now + 600),"expiration":\#(Self.now + 60)"#))
            #expect(expiring.status == 400, "\(expiring.text)")
            #expect(expiring.json?["error"]?["field"] == .string("send_at"))
            // A send_at in the past or too far ahead is refused.
            for sendAt in [Self.now - 3_600, Self.now + 40 * 86_400] {
                let reply = try await client.post(
                    "/v1/push", json: pushBody(devices: ["a"], extra: #""send_at":\#(sendAt)"#))
                #expect(reply.status == 400)
                #expect(reply.json?["error"]?["field"] == .string("send_at"))
            }
        }
    }

    /// The instant `time` (HH:MM) next shows in `zone` at or after `after`, by Foundation's calendar (not the
    /// service's arithmetic).
    static func nextLocal(_ time: String, in zone: String, after: Double) -> Double {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        let parts = time.split(separator: ":").map { Int($0)! }
        let next = calendar.nextDate(
            after: Date(timeIntervalSince1970: after - 1), matching: DateComponents(hour: parts[0], minute: parts[1]),
            matchingPolicy: .nextTime)!
        return next.timeIntervalSince1970
    }

    /// `HH:MM` of an instant in UTC.
    static func utcClock(_ instant: Double) -> String {
        let seconds = Int(instant) % 86_400
        return String(format: "%02d:%02d", seconds / 3_600, (seconds % 3_600) / 60)
    }

    @Test("local_time in each device's own zone; a device without one is skipped; quiet hours drop or hold")
    func localTimeAndQuietHours() async throws {
        try await withDelivery { client, mock, _ in
            let zones = ["paris": "Europe/Paris", "ny": "America/New_York", "kolkata": "Asia/Kolkata", "utc": "UTC"]
            for (index, (device, zone)) in zones.sorted(by: { $0.key < $1.key }).enumerated() {
                let reply = try await client.put(
                    "/v1/devices/\(device)/apns-tokens/\(deviceToken(10 + index))",
                    json: #"{"topic":"com.example.app","environment":"sandbox","time_zone":"\#(zone)"}"#)
                #expect(reply.status == 201, "\(reply.text)")
            }
            #expect(try await register(client, "nozone", deviceToken(20)).status == 201)
            let now = Date().timeIntervalSince1970
            let push = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["paris", "ny", "kolkata", "nozone"], payload: #"{"aps":{"alert":"morning"}}"#,
                    extra: #""enrich":false,"local_time":"09:30""#))
            #expect(push.status == 202, "\(push.text)")
            let id = try #require(push.json?["push_id"]?.stringValue)
            let report = try await client.get("/v1/push/\(id)")
            let expected = ["Europe/Paris", "America/New_York", "Asia/Kolkata"].map {
                Self.nextLocal("09:30", in: $0, after: now)
            }
            #expect(report.json?["plan"]?["first_send_at"]?.lenientDouble == expected.min(), "\(report.text)")
            #expect(report.json?["plan"]?["last_send_at"]?.lenientDouble == expected.max())
            #expect(report.json?["summary"]?["skipped"]?["no_time_zone"] == .int(1))
            #expect(report.json?["summary"]?["matched"] == .int(4))
            // Everything but a device whose 09:30 is this very minute waits.
            #expect(
                report.json?["summary"]?["scheduled"] == .int(Int64(expected.filter { $0 > now + 1 }.count)),
                "\(report.text)")

            // Quiet hours around now in UTC: the UTC device is inside them, New York (4 to 5 hours behind) is not.
            let window = "\(Self.utcClock(now - 5_400))-\(Self.utcClock(now + 5_400))"
            mock.clearReceived()
            let dropped = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["utc", "ny"], payload: #"{"aps":{"alert":"quiet"}}"#,
                    extra: #""enrich":false,"quiet_hours":{"window":"\#(window)","action":"drop"},"wait":true"#))
            #expect(dropped.json?["summary"]?["skipped"]?["quiet_hours"] == .int(1), "\(dropped.text)")
            // Devices registered in name order: kolkata 10, ny 11, paris 12, utc 13.
            #expect(Set(mock.receivedPushes.map(\.deviceToken)) == [deviceToken(11)])
            let held = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["utc"], payload: #"{"aps":{"alert":"quiet"}}"#,
                    extra: #""enrich":false,"quiet_hours":{"window":"\#(window)"}"#))
            let heldId = try #require(held.json?["push_id"]?.stringValue)
            let heldReport = try await client.get("/v1/push/\(heldId)")
            #expect(heldReport.json?["summary"]?["held"] == .int(1), "\(heldReport.text)")
            #expect(heldReport.json?["summary"]?["scheduled"] == .int(1))
            let end = Self.nextLocal(Self.utcClock(now + 5_400), in: "UTC", after: now)
            #expect(heldReport.json?["plan"]?["last_send_at"]?.lenientDouble == end)
        }
    }

    @Test("a frequency cap holds across pushes, per device, with the app's default or the push's own")
    func cap() async throws {
        try await Self.withApps { client, mock in
            let shop = Self.inApp("shop")
            #expect(try await register(client, "s1", deviceToken(1), topic: "com.c", headers: shop).status == 201)
            #expect(try await register(client, "s2", deviceToken(2), topic: "com.c", headers: shop).status == 201)
            func push(_ devices: [String], _ extra: String = "") async throws -> ServiceClient.Reply {
                try await client.post(
                    "/v1/push",
                    json: pushBody(
                        devices: devices, payload: #"{"aps":{"alert":"offer"}}"#,
                        extra: #""enrich":false,"wait":true"# + extra),
                    headers: shop)
            }
            // A background push is not counted (nobody sees it).
            let silent = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["s1"], payload: #"{"aps":{"content-available":1}}"#,
                    extra: #""enrich":false,"wait":true,"push_type":"background","priority":5"#),
                headers: shop)
            #expect(silent.json?["counts"]?["delivered"] == .int(1), "\(silent.text)")
            let one = try await push(["s1"])
            #expect(one.json?["counts"]?["delivered"] == .int(1), "\(one.text)")
            // The app's cap (1 per hour): s1 has had its push, s2 has not.
            let two = try await push(["s1", "s2"])
            #expect(two.json?["summary"]?["capped"] == .int(1), "\(two.text)")
            #expect(two.json?["counts"]?["delivered"] == .int(1))
            // A push may lift the cap, or set its own.
            let lifted = try await push(["s1"], #","cap":null"#)
            #expect(lifted.json?["counts"]?["delivered"] == .int(1), "\(lifted.text)")
            let own = try await push(["s1"], #","cap":{"max":3,"window_s":3600}"#)
            #expect(own.json?["counts"]?["delivered"] == .int(1), "\(own.text)")
            let over = try await push(["s1"], #","cap":{"max":3,"window_s":3600}"#)
            #expect(over.json?["summary"]?["capped"] == .int(1), "\(over.text)")
            let s1 = mock.receivedPushes.filter { $0.deviceToken == deviceToken(1) }
            #expect(s1.count == 4)
        }
    }

    @Test("the default app takes its zone and cap from ENRICH_DEFAULT_TIME_ZONE and ENRICH_FREQUENCY_CAP")
    func defaultAppZoneAndCap() async throws {
        try await withDelivery({
            $0.delivery.defaultTimeZone = "Asia/Kolkata"
            $0.delivery.frequencyCap = FrequencyCap(max: 1, window: 3_600)
        }) { client, _, _ in
            #expect(try await register(client, "plain", deviceToken(30)).status == 201)
            let now = Date().timeIntervalSince1970
            // No zone on the device: the default app's zone places its 09:30.
            let timed = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["plain"], payload: #"{"aps":{"alert":"morning"}}"#,
                    extra: #""enrich":false,"local_time":"09:30""#))
            let id = try #require(timed.json?["push_id"]?.stringValue, "\(timed.text)")
            let report = try await client.get("/v1/push/\(id)")
            #expect(report.json?["summary"]?["skipped"] == .object([:]), "\(report.text)")
            #expect(
                report.json?["plan"]?["first_send_at"]?.lenientDouble
                    == Self.nextLocal("09:30", in: "Asia/Kolkata", after: now))
            // The default cap (1 per hour) counts that scheduled push if it falls within the hour; a second
            // push now is capped when the first is due within an hour of now, else sent.
            let first = Self.nextLocal("09:30", in: "Asia/Kolkata", after: now)
            let second = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["plain"], payload: #"{"aps":{"alert":"offer"}}"#, extra: #""enrich":false,"wait":true"#))
            let cappedNow: Int64 = first - now < 3_600 ? 1 : 0
            #expect(second.json?["summary"]?["capped"] == .int(cappedNow), "\(second.text)")
            let third = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["plain"], payload: #"{"aps":{"alert":"offer"}}"#, extra: #""enrich":false,"wait":true"#))
            #expect(third.json?["summary"]?["capped"] == .int(1), "\(third.text)")
        }
    }

    @Test(
        "a region-entry push is neither capped nor counted: the next push under ENRICH_FREQUENCY_CAP=1/3600 is sent",
        arguments: Backend.allCases)
    func regionPushOutsideCap(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        try await withDelivery({
            $0.databaseURL = url.map { Secret($0) }
            $0.delivery.frequencyCap = FrequencyCap(max: 1, window: 3_600)
            $0.location.poiRegionsEnabled = false
            $0.location.detectVisits = false
        }) { client, sandbox, _ in
            #expect(try await register(client, "visitor", deviceToken(31)).status == 201)
            let created = try await client.post(
                "/v1/regions",
                json:
                    #"{"id":"store","latitude":48,"longitude":2,"radius":100,"push_payload":{"aps":{"alert":"Welcome"}}}"#
            )
            #expect(created.status == 201, "\(created.text)")
            let now = Date().timeIntervalSince1970
            #expect(try await postFixes(client, "visitor", [fixItem(now - 5, lat: 48, accuracy: 5)]).status == 200)
            try await waitForPushes(sandbox, count: 1)
            #expect(sandbox.receivedPushes.first?.status == 200)
            // The cap (1 per hour) has not been used by the region's push: this one goes.
            let first = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["visitor"], payload: #"{"aps":{"alert":"offer"}}"#, extra: #""enrich":false,"wait":true"#)
            )
            #expect(first.json?["summary"]?["capped"] == .int(0), "\(first.text)")
            #expect(first.json?["summary"]?["accepted"] == .int(1), "\(first.text)")
            // And a request's push is counted: the next one is capped.
            let second = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["visitor"], payload: #"{"aps":{"alert":"offer"}}"#, extra: #""enrich":false,"wait":true"#)
            )
            #expect(second.json?["summary"]?["capped"] == .int(1), "\(second.text)")
        }
    }

    @Test("receipts: a device's extension confirms with a receipt key; another app's push or device is refused")
    func receipts() async throws {
        try await Self.withApps { client, _ in
            let consumer = AppScopeTests.consumer
            #expect(try await register(client, "r1", deviceToken(1), topic: "com.a", headers: consumer).status == 201)
            #expect(try await register(client, "r2", deviceToken(2), topic: "com.a", headers: consumer).status == 201)
            let push = try await client.post(
                "/v1/push",
                json: pushBody(devices: ["r1", "r2"], payload: #"{"aps":{"alert":"hi"}}"#, extra: #""enrich":false"#),
                headers: consumer)
            let pushId = try #require(push.json?["push_id"]?.stringValue)
            let extensionKey = AppScopeTests.bearer(Self.receiptKey)
            let first = try await client.post(
                "/v1/receipts", json: #"{"push_id":"\#(pushId)","device_id":"r1"}"#, headers: extensionKey)
            #expect(first.status == 201, "\(first.text)")
            let again = try await client.post(
                "/v1/receipts", json: #"{"push_id":"\#(pushId)","device_id":"r1"}"#, headers: extensionKey)
            #expect(again.status == 200)
            #expect(again.json?["already_confirmed"] == .bool(true))
            let report = try await client.get("/v1/push/\(pushId)", headers: consumer)
            #expect(report.json?["summary"]?["confirmed"] == .int(1), "\(report.text)")
            #expect(report.json?["summary"]?["accepted"] == .int(2))
            // The receipt key does nothing else.
            #expect(try await client.get("/v1/push/\(pushId)", headers: extensionKey).status == 403)
            #expect(
                try await register(client, "r3", deviceToken(3), topic: "com.a", headers: extensionKey).status == 403)
            // Another app's push is one that does not exist; a device the push did not go to is refused.
            #expect(
                try await register(client, "c1", deviceToken(9), topic: "com.b", headers: AppScopeTests.courier).status
                    == 201)
            let courierPush = try await client.post(
                "/v1/push",
                json: pushBody(devices: ["c1"], payload: #"{"aps":{"alert":"x"}}"#, extra: #""enrich":false"#),
                headers: AppScopeTests.courier)
            let courierId = try #require(courierPush.json?["push_id"]?.stringValue)
            let foreign = try await client.post(
                "/v1/receipts", json: #"{"push_id":"\#(courierId)","device_id":"c1"}"#, headers: extensionKey)
            #expect(foreign.status == 404)
            #expect(foreign.errorReason == "push_not_found")
            let stranger = try await client.post(
                "/v1/receipts", json: #"{"push_id":"\#(pushId)","device_id":"r9"}"#, headers: extensionKey)
            #expect(stranger.status == 404)
            #expect(stranger.errorReason == "device_not_in_push")
            let courierReport = try await client.get("/v1/push/\(courierId)", headers: AppScopeTests.courier)
            #expect(courierReport.json?["summary"]?["confirmed"] == .int(0))
            // A device the push was not sent to (capped here) cannot confirm it.
            let capped = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["r1"], payload: #"{"aps":{"alert":"again"}}"#,
                    extra: #""enrich":false,"wait":true,"cap":{"max":1,"window_s":3600}"#),
                headers: consumer)
            #expect(capped.json?["summary"]?["capped"] == .int(1), "\(capped.text)")
            let cappedId = try #require(capped.json?["push_id"]?.stringValue)
            let notSent = try await client.post(
                "/v1/receipts", json: #"{"push_id":"\#(cappedId)","device_id":"r1"}"#, headers: extensionKey)
            #expect(notSent.status == 404)
            #expect(notSent.errorReason == "device_not_in_push")
            // Each app lists its own scheduled pushes only.
            let later = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["c1"], payload: #"{"aps":{"alert":"later"}}"#,
                    extra: #""enrich":false,"send_at":\#(Self.now + 3_600)"#),
                headers: AppScopeTests.courier)
            let laterId = try #require(later.json?["push_id"]?.stringValue)
            let courierList = try await client.get("/v1/push", headers: AppScopeTests.courier)
            #expect(courierList.text.contains(laterId))
            let consumerList = try await client.get("/v1/push", headers: consumer)
            #expect(consumerList.status == 200)
            #expect(!consumerList.text.contains(laterId), "\(consumerList.text)")
        }
    }
}
