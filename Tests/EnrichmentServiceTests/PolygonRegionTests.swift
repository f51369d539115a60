import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore
import MockAPNs
import TestSupport
import Testing

/// Polygon regions over HTTP (issue 47): enter/exit events and `in_region` checked against a brute-force
/// point-in-polygon oracle (`PolygonOracle`, winding number) on seeded fixes, on SQLite and PostgreSQL; what a bad
/// polygon is told; a region push and `{{region}}` with a polygon.
@Suite("Polygon regions over HTTP", .serialized)
struct PolygonRegionTests {
    static let rings: [(id: String, ring: [PolygonOracle.Point])] = [
        ("convex", PolygonOracle.convex), ("star", PolygonOracle.star), ("notched", PolygonOracle.notched),
    ]

    struct Fix {
        var time: Double
        var point: PolygonOracle.Point
    }

    /// 24 devices of 12 fixes each, 10 s apart (clear of the 5 s rule), each fix in the widened box of one of the
    /// polygons (drawn at random; the last by the device's number), never within 1e-7° of an edge.
    static func walks(seed: UInt64, start: Double) -> [String: [Fix]] {
        var generator = SeededGenerator(seed: seed)
        var walks: [String: [Fix]] = [:]
        for device in 0..<24 {
            walks["p\(device)"] = (0..<12).map { step in
                // The last fix near each polygon in turn, every other one in the middle of its box (a star fills
                // little of its box), so that each `in_region` has devices to find and devices to leave out.
                let drawn = Int.random(in: 0..<rings.count, using: &generator)
                let last = step == 11
                let ring = rings[last ? device % rings.count : drawn].ring
                let margin = last && device % 2 == 0 ? -0.35 : 0.3
                return Fix(
                    time: start + Double(step) * 10,
                    point: PolygonOracle.point(around: ring, margin: margin, using: &generator))
            }
        }
        return walks
    }

    /// The events the rules of §4.5 give, from the oracle alone: per region, an enter when the device is first
    /// inside, then one event at each change.
    static func expectedEvents(_ fixes: [Fix]) -> [String] {
        var events: [String] = []
        for (id, ring) in rings {
            var logged: Bool?
            for fix in fixes {
                let inside = PolygonOracle.contains(ring, fix.point)
                if logged == nil ? inside : logged != inside {
                    events.append("\(Int(fix.time)) \(inside ? "region_enter" : "region_exit") custom_\(id)")
                    logged = inside
                }
            }
        }
        return events.sorted()
    }

    /// The devices an audience holds now (`POST /v1/audiences/preview`), in the default app.
    static func preview(_ client: ServiceClient, _ audience: String) async throws -> Set<String> {
        let reply = try await client.post("/v1/audiences/preview", json: #"{"audience":\#(audience),"sample":1000}"#)
        #expect(reply.status == 200, "\(audience): \(reply.text)")
        guard case .array(let items)? = reply.json?["sample"] else { return [] }
        return Set(items.compactMap(\.stringValue))
    }

    static func createRegions(_ client: ServiceClient) async throws {
        for (id, ring) in rings {
            let reply = try await client.post(
                "/v1/regions", json: #"{"id":"\#(id)","polygon":\#(PolygonOracle.json(ring))}"#)
            #expect(reply.status == 201, "\(reply.text)")
        }
    }

    @Test(
        "enter/exit events and in_region follow the polygon, as a brute-force oracle says, on seeded fixes",
        arguments: Backend.allCases)
    func eventsAndAudience(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        try await withService({
            $0.databaseURL = url.map { Secret($0) }
            $0.loadSamplePOIs = false
            $0.location.poiRegionsEnabled = false
            $0.location.detectVisits = false
        }) { client in
            try await Self.createRegions(client)
            // Recent fixes: `in_region` reads last fixes up to an hour old.
            let start = (Date().timeIntervalSince1970 - 600).rounded()
            let walks = Self.walks(seed: 4_710, start: start)
            var total = 0
            for (device, fixes) in walks.sorted(by: { $0.key < $1.key }) {
                let reply = try await postFixes(
                    client, device, fixes.map { fixItem($0.time, lat: $0.point.latitude, lng: $0.point.longitude) })
                #expect(reply.status == 200, "\(reply.text)")
                let got = try await eventList(client, device).map { event in
                    let time = Int(event["date"]?.lenientDouble ?? 0)
                    return "\(time) \(event["type"]?.stringValue ?? "") \(event["region_id"]?.stringValue ?? "")"
                }.sorted()
                let want = Self.expectedEvents(fixes)
                #expect(got == want, "\(backend) \(device)")
                total += want.count
            }
            // Enough transitions that a wrong rule cannot pass by chance.
            #expect(total > 100, "only \(total) events expected")
            // in_region holds the devices whose last fix is inside, by the oracle.
            for (id, ring) in Self.rings {
                let want = Set(
                    walks.filter { PolygonOracle.contains(ring, $0.value.last!.point) }.map(\.key))
                let got = try await Self.preview(client, #"{"in_region":"\#(id)"}"#)
                #expect(got == want, "\(backend) in_region \(id): \(got.symmetricDifference(want))")
                #expect(!want.isEmpty && want.count < walks.count, "\(id): a case that tests nothing")
            }
            let inStar = Set(
                walks.filter { PolygonOracle.contains(PolygonOracle.star, $0.value.last!.point) }.map(\.key))
            let inNotched = Set(
                walks.filter { PolygonOracle.contains(PolygonOracle.notched, $0.value.last!.point) }.map(\.key))
            let either = try await Self.preview(client, #"{"any":[{"in_region":"star"},{"in_region":"notched"}]}"#)
            #expect(either == inStar.union(inNotched))
        }
    }

    @Test("a bad polygon is 400 invalid_region naming the field, why and what is allowed; GET shows the shape")
    func validationAndShape() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            func ring(_ points: [(Double, Double)]) -> String {
                PolygonOracle.json(points.map { (latitude: $0.0, longitude: $0.1) })
            }
            let square = [(48.0, 2.0), (48.0, 2.01), (48.01, 2.01), (48.01, 2.0)]
            let many = (0..<1_001).map { index -> (Double, Double) in
                let angle = 2 * Double.pi * Double(index) / 1_001
                return (48 + 0.01 * sin(angle), 2 + 0.01 * cos(angle))
            }
            let cases: [(String, String, String)] = [
                (#""polygon":\#(ring(Array(square.prefix(2))))"#, "polygon", "3 to 1000 distinct vertices"),
                (#""polygon":\#(ring(square + [(48.01, 2.01)]))"#, "polygon[4]", "repeats polygon[2]"),
                (#""polygon":\#(ring([(48.0, 2.0), (48.01, 2.01), (48.01, 2.0), (48.0, 2.01)]))"#, "polygon", "cross"),
                (#""polygon":\#(ring(many))"#, "polygon", "at most 1000"),
                (
                    #""polygon":\#(ring([(10.0, 179.9), (10.0, -179.9), (10.1, -179.9), (10.1, 179.9)]))"#, "polygon",
                    "antimeridian"
                ),
                (#""polygon":\#(ring(square)),"radius":100"#, "polygon", "never both"),
                (
                    #""polygon":\#(ring([(48.0, 2.0), (48.0, 181.0), (48.01, 2.01)]))"#, "polygon[1].longitude",
                    "[-180, 180]"
                ),
            ]
            for (members, field, words) in cases {
                let reply = try await client.post("/v1/regions", json: #"{"id":"bad",\#(members)}"#)
                #expect(reply.status == 400, "\(field)")
                #expect(reply.errorReason == "invalid_region")
                #expect(reply.json?["error"]?["field"] == .string(field), "\(reply.text)")
                #expect(reply.json?["error"]?["message"]?.stringValue?.contains(words) == true, "\(reply.text)")
            }
            let created = try await client.post("/v1/regions", json: #"{"id":"sq","polygon":\#(ring(square))}"#)
            #expect(created.status == 201)
            _ = try await client.post("/v1/regions", json: #"{"id":"c","latitude":48,"longitude":2,"radius":50}"#)
            guard case .array(let listed)? = try await client.get("/v1/regions").json?["regions"] else {
                Issue.record("no regions")
                return
            }
            #expect(listed.map { $0["id"]?.stringValue ?? "" } == ["custom_c", "custom_sq"])
            #expect(listed.map { $0["shape"]?.stringValue ?? "" } == ["circle", "polygon"])
            #expect(listed[0]["polygon"] == nil)
            guard case .array(let vertices)? = listed[1]["polygon"] else {
                Issue.record("no polygon listed")
                return
            }
            #expect(
                vertices.map { [$0["latitude"]?.lenientDouble ?? 0, $0["longitude"]?.lenientDouble ?? 0] }
                    == square.map { [$0.0, $0.1] })
        }
    }

    @Test("a polygon region's push goes on entering the polygon, not its notch, and {{region}} names it")
    func pushAndTemplate() async throws {
        try await withDelivery({
            $0.loadSamplePOIs = false
            $0.location.poiRegionsEnabled = false
            $0.location.detectVisits = false
            $0.bodyTemplate = "{{name}}{{#region}} in {{region}}{{/region}}"
        }) { client, sandbox, _ in
            #expect(
                try await client.post("/v1/pois", json: onePOI("k", "Kiosk", lat: 48.850, lng: 2.360)).status == 200)
            _ = try await register(client, "walker", deviceToken(47))
            let payload =
                #"{"aps":{"alert":{"title":"Welcome","body":"Hello"},"mutable-content":1,"category":"location"}}"#
            let created = try await client.post(
                "/v1/regions",
                json:
                    #"{"id":"ground","polygon":\#(PolygonOracle.json(PolygonOracle.notched)),"push_payload":\#(payload)}"#
            )
            #expect(created.status == 201, "\(created.text)")
            let now = Date().timeIntervalSince1970.rounded()
            let notch = PolygonOracle.inNotch
            let bar = PolygonOracle.inNotchedBar
            // In the notch: inside the circle the region shows, outside the polygon. No event, no push.
            _ = try await postFixes(client, "walker", [fixItem(now - 30, lat: notch.latitude, lng: notch.longitude)])
            #expect(try await eventList(client, "walker").isEmpty)
            let outside = try await client.post(
                "/v1/enrich",
                json: enrichBody(device: "walker", payload: locationPayload(timestamp: String(Int64(now)))))
            #expect(outside.json?["notification"]?["body"] == .string("Kiosk"))
            // Into the polygon: one enter, one push, enriched with the region's name.
            _ = try await postFixes(client, "walker", [fixItem(now - 20, lat: bar.latitude, lng: bar.longitude)])
            let events = try await eventList(client, "walker")
            #expect(events.map { $0["type"]?.stringValue ?? "" } == ["region_enter"])
            #expect(events.first?["region_id"] == .string("custom_ground"))
            #expect(events.first?["shape"] == .string("polygon"))
            let deadline = ContinuousClock.now + .seconds(10)
            while payloads(sandbox, token: deviceToken(47)).isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let sent = payloads(sandbox, token: deviceToken(47))
            #expect(sent.count == 1)
            #expect(sent.first?["aps"]?["alert"]?["title"] == .string("Welcome"))
            #expect(sent.first?["aps"]?["alert"]?["body"] == .string("Kiosk in ground"))
            let inside = try await client.post(
                "/v1/enrich",
                json: enrichBody(device: "walker", payload: locationPayload(timestamp: String(Int64(now)))))
            #expect(inside.json?["notification"]?["body"] == .string("Kiosk in ground"))
            #expect(inside.json?["device_context"]?["region"] == .string("ground"))
        }
    }
}
