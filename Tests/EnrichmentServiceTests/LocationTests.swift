import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore
import MockAPNs
import Synchronization
import TestSupport
import Testing

/// A latitude `metres` north of `latitude` on the project's sphere.
func north(_ latitude: Double, metres: Double) -> Double {
    latitude + metres / (Coordinate.earthRadius * Double.pi / 180)
}

func postFixes(_ client: ServiceClient, _ device: String, _ items: [String]) async throws -> ServiceClient.Reply {
    try await client.post("/v1/devices/\(device)/locations", json: #"{"locations":[\#(items.joined(separator: ","))]}"#)
}

func fixItem(_ t: Double, lat: Double, lng: Double = 2, accuracy: Double = 0, extra: String = "") -> String {
    #"{"latitude":\#(lat),"longitude":\#(lng),"utc_timestamp":\#(t),"horizontal_accuracy":\#(accuracy)\#(extra)}"#
}

/// A one-POI GeoJSON import body.
func onePOI(_ id: String, _ name: String, lat: Double, lng: Double) -> String {
    #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"store_id":"\#(id)","name":"\#(name)"},"geometry":{"type":"Point","coordinates":[\#(lng),\#(lat)]}}]}"#
}

func eventList(_ client: ServiceClient, _ device: String) async throws -> [JSONValue] {
    guard case .array(let events)? = try await client.get("/v1/devices/\(device)/events").json?["events"] else {
        return []
    }
    return events
}

@Suite("Location intelligence over HTTP", .serialized)
struct LocationTests {
    @Test("custom regions: created, replaced, listed, deleted; bad ones name the field")
    func regionsCRUD() async throws {
        try await withService { client in
            let created = try await client.post(
                "/v1/regions", json: #"{"id":"shop","latitude":48,"longitude":2,"radius":100}"#)
            #expect(created.status == 201)
            #expect(created.json?["id"] == .string("custom_shop"))
            #expect(created.json?["policy"] == .string("either"))
            let replaced = try await client.post(
                "/v1/regions", json: #"{"id":"shop","latitude":48,"longitude":2,"radius":150}"#)
            #expect(replaced.status == 200)
            for (body, field) in [
                (#"{"id":"a","latitude":48,"longitude":2,"radius":0.5}"#, "radius"),
                (#"{"id":"a","latitude":91,"longitude":2,"radius":10}"#, "latitude"),
                (#"{"id":"my position","latitude":48,"longitude":2,"radius":10}"#, "id"),
                (#"{"id":"a","latitude":48,"longitude":2,"radius":10,"policy":"never"}"#, "policy"),
                (#"{"id":"a","latitude":48,"longitude":2,"radius":10,"wifi_bssid":"zz"}"#, "wifi_bssid"),
                (#"{"id":"a","latitude":48,"longitude":2,"radius":10,"colour":"red"}"#, "colour"),
            ] {
                let reply = try await client.post("/v1/regions", json: body)
                #expect(reply.status == 400, "\(body)")
                #expect(reply.json?["error"]?["field"] == .string(field), "\(reply.text)")
            }
            guard case .array(let listed)? = try await client.get("/v1/regions").json?["regions"] else {
                Issue.record("no regions")
                return
            }
            #expect(listed.count == 1)
            #expect(listed.first?["radius"]?.lenientDouble == 150)
            #expect(try await client.delete("/v1/regions/shop").status == 200)
            #expect(try await client.delete("/v1/regions/custom_shop").errorReason == "unknown_region")
        }
    }

    @Test(
        "enter and exit on the fix time: strict inside, the 5 s rule, events and the webhook",
        arguments: Backend.allCases)
    func enterExit(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        let hook = RecordingWebhook()
        try await hook.run { hookURL in
            try await withService({
                $0.databaseURL = url.map { Secret($0) }
                $0.locationWebhookURL = hookURL + "/hook"
                $0.location.poiRegionsEnabled = false
                $0.location.detectVisits = false
            }) { client in
                _ = try await client.post(
                    "/v1/regions", json: #"{"id":"shop","latitude":48,"longitude":2,"radius":100}"#)
                let t = 1_700_000_000.0
                let reply = try await postFixes(
                    client, "dev",
                    [
                        fixItem(t, lat: north(48, metres: 500)),
                        // 120 m with 20 m accuracy: 100 is not < 100, still outside.
                        fixItem(t + 10, lat: north(48, metres: 120), accuracy: 20),
                        fixItem(t + 20, lat: north(48, metres: 50)),
                        // 4 s later: outside, but within 5 s of the enter: ignored.
                        fixItem(t + 24, lat: north(48, metres: 500)),
                        fixItem(t + 40, lat: north(48, metres: 500)),
                    ])
                #expect(reply.status == 200)
                #expect(reply.json?["events"] == .int(2))
                let events = try await eventList(client, "dev")
                #expect(
                    events.map { $0["name"]?.stringValue ?? "" } == [
                        "woos_geofence_entered_event", "woos_geofence_exited_event",
                    ])
                #expect(events.map { $0["date"]?.lenientDouble ?? 0 } == [t + 20, t + 40])
                #expect(events.first?["region_id"] == .string("custom_shop"))
                #expect(events.first?["from_position_detection"] == .bool(true))
                // Replaying older fixes changes nothing.
                _ = try await postFixes(client, "dev", [fixItem(t + 30, lat: 48)])
                #expect(try await eventList(client, "dev").count == 2)
                // The webhook gets both, in order.
                let deadline = ContinuousClock.now + .seconds(10)
                while hook.bodies.withLock({ $0.count }) < 2, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(
                    hook.bodies.withLock { $0.map { $0["type"]?.stringValue ?? "" } } == [
                        "region_enter", "region_exit",
                    ])
            }
        }
    }

    @Test("OpenLocate fields are kept, typed, returned; a Wi-Fi region matches on the network")
    func openLocateAndWifi() async throws {
        try await withService({
            $0.location.poiRegionsEnabled = false
            $0.location.detectVisits = false
        }) { client in
            _ = try await client.post(
                "/v1/regions", json: #"{"id":"cafe","latitude":10,"longitude":10,"radius":50,"wifi_ssid":"CafeNet"}"#)
            // A wide region whose centre is 89 km away: still found (the search reaches the largest radius).
            _ = try await client.post(
                "/v1/regions", json: #"{"id":"big","latitude":48.8,"longitude":2,"radius":100000}"#)
            let now = Date().timeIntervalSince1970 - 5
            let reply = try await postFixes(
                client, "w",
                [
                    fixItem(
                        now, lat: 48, accuracy: 10,
                        extra:
                            #","speed":1.5,"course":90,"altitude":35,"vertical_accuracy":3,"wifi_ssid":"CafeNet","wifi_bssid":"A4:2B:B0:12:34:56","carrier_name":"Orange","is_charging":true,"device_model":"iPhone15,2","os_version":"17.1","ad_id":"abc","ad_opt_out":false,"id_type":"idfa","utc_timestamp_received":\#(now + 1),"location_context":"regular""#
                    ),
                    fixItem(now - 100, lat: 48, extra: #","is_charging":"maybe""#),
                    fixItem(now - 200, lat: 48, extra: #","course":400"#),
                    fixItem(now - 300, lat: 48, extra: #","wifi_bssid":"nope""#),
                ])
            #expect(reply.json?["accepted"] == .int(1))
            guard case .array(let rejected)? = reply.json?["rejected"], rejected.count >= 2 else {
                Issue.record("no rejected list of two: \(reply.text)")
                return
            }
            let reasons = rejected.map { $0["reason"]?.stringValue ?? "" }
            #expect(reasons[0].contains("is_charging"))
            #expect(reasons[1].contains("course"))
            #expect(reasons[2].contains("wifi_bssid"))
            let fix = try await client.get("/v1/devices/w/location").json
            #expect(fix?["speed"]?.lenientDouble == 1.5)
            #expect(fix?["wifi_bssid"] == .string("a4:2b:b0:12:34:56"))
            #expect(fix?["is_charging"] == .bool(true))
            #expect(fix?["device_model"] == .string("iPhone15,2"))
            #expect(fix?["location_context"] == .string("regular"))
            // 4,000 km from the circle, on its network: inside (policy either).
            let events = try await eventList(client, "w")
            #expect(Set(events.map { $0["region_id"]?.stringValue ?? "" }) == ["custom_cafe", "custom_big"])
        }
    }

    @Test("POI regions follow the nearest POI and are entered on creation")
    func poiRegions() async throws {
        try await withService({
            $0.loadSamplePOIs = false
            $0.location.detectVisits = false
        }) { client in
            #expect(try await client.post("/v1/pois", json: onePOI("s1", "Bakery", lat: 45, lng: 5)).status == 200)
            let t = 1_700_000_000.0
            _ = try await postFixes(client, "p", [fixItem(t, lat: north(45, metres: 60), lng: 5)])
            let events = try await eventList(client, "p")
            #expect(events.map { $0["region_id"]?.stringValue ?? "" } == ["poi_s1_Bakery - 100.0 m"])
            #expect(events.first?["from_position_detection"] == .bool(false))
            #expect(events.first?["idstore"] == .string("s1"))
            // Staying put refreshes the region: no second enter.
            _ = try await postFixes(client, "p", [fixItem(t + 60, lat: north(45, metres: 50), lng: 5)])
            #expect(try await eventList(client, "p").count == 1)
        }
    }

    @Test("visits are detected from fixes and go through the pipeline")
    func detectedVisits() async throws {
        try await withService({ $0.location.poiRegionsEnabled = false }) { client in
            let t = 1_700_000_000.0
            var items: [String] = []
            for i in 0..<16 { items.append(fixItem(t + Double(i) * 60, lat: 48, accuracy: 8)) }
            _ = try await postFixes(client, "v", items)
            #expect(try await client.get("/v1/devices/v/visits").json?["visits"] == .array([]))
            // Leaving closes the stay.
            _ = try await postFixes(client, "v", [fixItem(t + 1000, lat: north(48, metres: 2000), accuracy: 8)])
            guard case .array(let visits)? = try await client.get("/v1/devices/v/visits").json?["visits"] else {
                Issue.record("no visits")
                return
            }
            #expect(visits.count == 1)
            #expect(visits.first?["id"] == .string("fixes-v-\(Int(t))"))
            #expect(visits.first?["departure"]?.lenientDouble == t + 900)
            #expect(visits.first?["source"] == .string("detected"))
            guard case .array(let zois)? = try await client.get("/v1/devices/v/zois").json?["zois"] else {
                Issue.record("no zois list")
                return
            }
            #expect(zois.count == 1)
            #expect(try await eventList(client, "v").contains { $0["name"] == .string("woos_visit_event") })
        }
    }

    /// Nights at home and office days at work over three weeks, ending a day before `end`. Each visit stays
    /// within its day, so both zones cover the same weeks (a visit crossing Saturday night into Sunday would
    /// add a week to home alone and make work non-recurrent, by the SDK's rule).
    static func homeAndWork(end: Double) -> String {
        let day = 86_400.0
        let start = (end / day).rounded(.down) * day - 22 * day
        var items: [String] = []
        func visit(_ from: Double, _ to: Double, lat: Double) {
            items.append(
                #"{"arrival":\#(from),"departure":\#(to),"latitude":\#(lat),"longitude":5,"horizontal_accuracy":10}"#)
        }
        for d in 0..<21 {
            let midnight = start + Double(d) * day
            visit(midnight, midnight + 7 * 3600, lat: 45)
            visit(midnight + 9 * 3600, midnight + 17 * 3600, lat: 45.02)
            visit(midnight + 21 * 3600, midnight + 23 * 3600 + 59 * 60, lat: 45)
        }
        return #"{"visits":[\#(items.joined(separator: ","))]}"#
    }

    @Test("home and work zones: labels, a zone event on a visit and a fix, and the body says 'near home'")
    func homeZoneEnrichment() async throws {
        try await withService({
            $0.loadSamplePOIs = false
            $0.location.poiRegionsEnabled = false
            $0.location.detectVisits = false
        }) { client in
            let now = Date().timeIntervalSince1970
            let reply = try await client.post("/v1/devices/h/visits", json: Self.homeAndWork(end: now))
            #expect(reply.json?["accepted"] == .int(63))
            guard case .array(let zois)? = try await client.get("/v1/devices/h/zois").json?["zois"] else {
                Issue.record("no zois")
                return
            }
            #expect(zois.map { $0["period"]?.stringValue ?? "" } == ["HOME_PERIOD", "WORK_PERIOD"])
            #expect(zois.first?["weekly_density"].map { if case .array(let a) = $0 { a.count } else { 0 } } == 168)
            // A further visit at home records a classified-zone exit (a completed visit), as the SDK does.
            let again = try await client.post(
                "/v1/devices/h/visits",
                json:
                    #"{"visits":[{"arrival":\#(now - 7200),"departure":\#(now - 3600),"latitude":45,"longitude":5,"horizontal_accuracy":10}]}"#
            )
            #expect(again.json?["accepted"] == .int(1))
            let names = try await eventList(client, "h").map { $0["name"]?.stringValue ?? "" }
            #expect(names.contains("woos_zoi_classified_exited_event"))
            // A fix at home enters the home zone region; enrichment then says where the device is.
            #expect(try await client.post("/v1/pois", json: onePOI("b", "Bakery", lat: 45.0005, lng: 5)).status == 200)
            _ = try await postFixes(client, "h", [fixItem(now - 5, lat: 45, lng: 5, accuracy: 5)])
            let zoneEvents = try await eventList(client, "h").filter { $0["type"] == .string("zoi_enter") }
            #expect(zoneEvents.last?["period"] == .string("HOME_PERIOD"))
            let enriched = try await client.post(
                "/v1/enrich", json: enrichBody(device: "h", payload: locationPayload(timestamp: String(Int64(now)))))
            #expect(enriched.json?["notification"]?["body"] == .string("Bakery is 56 m away, near home"))
            #expect(enriched.json?["device_context"]?["zone"] == .string("home"))
        }
    }

    @Test("a region with a push payload sends an enriched push when a device enters")
    func regionPush() async throws {
        try await withDelivery({
            $0.location.poiRegionsEnabled = false
            $0.location.detectVisits = false
        }) { client, sandbox, _ in
            _ = try await register(client, "rp", deviceToken(42))
            let payload =
                #"{"aps":{"alert":{"title":"Welcome","body":"Hello"},"mutable-content":1,"category":"location"}}"#
            let created = try await client.post(
                "/v1/regions",
                json: #"{"id":"store","latitude":48,"longitude":2,"radius":100,"push_payload":\#(payload)}"#)
            #expect(created.status == 201)
            let now = Date().timeIntervalSince1970
            _ = try await postFixes(client, "rp", [fixItem(now - 5, lat: 48, accuracy: 5)])
            let deadline = ContinuousClock.now + .seconds(10)
            while payloads(sandbox, token: deviceToken(42)).isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let sent = payloads(sandbox, token: deviceToken(42))
            #expect(sent.count == 1)
            #expect(sent.first?["aps"]?["alert"]?["title"] == .string("Welcome"))
            // Enriched on the way: the body is not the template's original text.
            #expect(sent.first?["aps"]?["alert"]?["body"] != .string("Hello"))
        }
    }

    @Test("unknown devices answer 404 with a reason; deleting a device removes its location data")
    func unknownAndDelete() async throws {
        try await withService { client in
            #expect(try await client.get("/v1/devices/nobody/zois").errorReason == "unknown_device")
            #expect(try await client.get("/v1/devices/nobody/events").errorReason == "unknown_device")
            let bad = try await client.post("/v1/devices/x/visits", json: #"{"visit":[]}"#)
            #expect(bad.errorReason == "invalid_visits")
            _ = try await client.post("/v1/devices/x/visits", json: Self.homeAndWork(end: 1_700_000_000))
            let deleted = try await client.delete("/v1/devices/x")
            #expect((deleted.json?["deleted_location_records"]?.lenientDouble ?? 0) > 63)
            #expect(try await client.get("/v1/devices/x/zois").status == 404)
        }
    }
}
