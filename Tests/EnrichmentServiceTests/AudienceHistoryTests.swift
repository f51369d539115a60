import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore
import TestSupport
import Testing

/// `zoi` and `visited` audiences against a synthetic population (seeded): devices with three weeks of nights at
/// home and days at work (which the service turns into home and work zones) and evenings at POIs. Every answer is
/// checked against a brute-force computation over the same data (the visits as generated, the zones as stored),
/// on SQLite and PostgreSQL.
@Suite("Location audiences: zones and visits", .serialized)
struct AudienceHistoryTests {
    struct Stop: Sendable {
        var arrival: Double
        var departure: Double
        var coordinate: Coordinate
    }

    struct Device: Sendable {
        var id: String
        var app: String
        var stops: [Stop]
    }

    struct Place: Sendable {
        var id: String
        var type: String
        var tag: String
        var coordinate: Coordinate
    }

    static let paris = Coordinate(latitude: 48.8566, longitude: 2.3522)
    static let day = 86_400.0

    /// A point about `metres` from `center`, in the direction `angle`.
    static func offset(_ center: Coordinate, metres: Double, angle: Double) -> Coordinate {
        Coordinate(
            latitude: center.latitude + metres * sin(angle) / 111_195,
            longitude: center.longitude + metres * cos(angle) / (111_195 * cos(center.latitude * .pi / 180)))
    }

    /// 40 POIs of three types around Paris, each with one of two tags.
    static func places(_ generator: inout SeededGenerator) -> [Place] {
        (0..<40).map { index in
            Place(
                id: "p\(index)", type: ["cafe", "gym", "bakery"][index % 3], tag: index % 2 == 0 ? "terrace" : "wifi",
                coordinate: offset(
                    paris, metres: Double.random(in: 0...6_000, using: &generator),
                    angle: Double.random(in: 0..<(2 * .pi), using: &generator)))
        }
    }

    /// 160 devices of two apps: 21 nights at home and days at work ending a day before `now`, and up to 4 evenings
    /// at POIs (0 to 160 m from them, so that some miss a 100 m radius), on days spread over the three weeks.
    static func population(now: Double, places: [Place], generator: inout SeededGenerator) -> [Device] {
        let start = (now / day).rounded(.down) * day - 22 * day
        return (0..<160).map { index in
            let home = offset(
                paris, metres: Double.random(in: 0...7_000, using: &generator),
                angle: Double.random(in: 0..<(2 * .pi), using: &generator))
            let work = offset(
                paris, metres: Double.random(in: 0...7_000, using: &generator),
                angle: Double.random(in: 0..<(2 * .pi), using: &generator))
            var evenings: [Int: Stop] = [:]
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                let d = Int.random(in: 0..<21, using: &generator)
                let place = places[Int.random(in: 0..<places.count, using: &generator)]
                let at = offset(
                    place.coordinate, metres: Double.random(in: 0...160, using: &generator),
                    angle: Double.random(in: 0..<(2 * .pi), using: &generator))
                let arrival = start + Double(d) * day + 18 * 3600 + Double.random(in: 0...1800, using: &generator)
                evenings[d] = Stop(arrival: arrival, departure: arrival + 3600, coordinate: at)
            }
            var stops: [Stop] = []
            for d in 0..<21 {
                let midnight = start + Double(d) * day
                stops.append(Stop(arrival: midnight, departure: midnight + 7 * 3600, coordinate: home))
                stops.append(Stop(arrival: midnight + 9 * 3600, departure: midnight + 17 * 3600, coordinate: work))
                if let evening = evenings[d] { stops.append(evening) }
                stops.append(Stop(arrival: midnight + 21 * 3600, departure: midnight + 86_340, coordinate: home))
            }
            return Device(id: "h\(index)", app: index % 3 == 0 ? "courier" : "consumer", stops: stops)
        }
    }

    static func poiDocument(_ places: [Place]) -> String {
        let features = places.map { place in
            #"{"type":"Feature","properties":{"store_id":"\#(place.id)","name":"\#(place.id)","types":["\#(place.type)"],"tags":["\#(place.tag)"]},"geometry":{"type":"Point","coordinates":[\#(place.coordinate.longitude),\#(place.coordinate.latitude)]}}"#
        }
        return #"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#
    }

    /// A zone as stored: its period and its centre (from its spherical-mercator mean, converted here).
    struct Zone: Sendable {
        var period: String?
        var coordinate: Coordinate
    }

    static func zones(_ client: ServiceClient, _ device: Device) async throws -> [Zone] {
        let reply = try await client.get("/v1/devices/\(device.id)/zois", headers: ["Enrich-App": device.app])
        guard case .array(let items)? = reply.json?["zois"] else {
            Issue.record("no zois for \(device.id): \(reply.text)")
            return []
        }
        let radius = 6_378_137.0
        return items.compactMap { item in
            guard let x = item["mean_x"]?.lenientDouble, let y = item["mean_y"]?.lenientDouble else { return nil }
            return Zone(
                period: item["period"]?.stringValue,
                coordinate: Coordinate(
                    latitude: (2 * atan(exp(y / radius)) - .pi / 2) * 180 / .pi, longitude: x / radius * 180 / .pi))
        }
    }

    /// Winding-number test (independent of the service's even-odd one).
    static func inPolygon(_ point: Coordinate, _ vertices: [Coordinate]) -> Bool {
        var winding = 0
        for i in vertices.indices {
            let a = vertices[i]
            let b = vertices[(i + 1) % vertices.count]
            let side =
                (b.longitude - a.longitude) * (point.latitude - a.latitude)
                - (point.longitude - a.longitude) * (b.latitude - a.latitude)
            if a.latitude <= point.latitude {
                if b.latitude > point.latitude && side > 0 { winding += 1 }
            } else if b.latitude <= point.latitude && side < 0 {
                winding -= 1
            }
        }
        return winding != 0
    }

    static func haversine(_ a: Coordinate, _ b: Coordinate) -> Double {
        let r = 6_371_008.8
        let dLat = (b.latitude - a.latitude) * .pi / 180
        let dLon = (b.longitude - a.longitude) * .pi / 180
        let h =
            sin(dLat / 2) * sin(dLat / 2)
            + cos(a.latitude * .pi / 180) * cos(b.latitude * .pi / 180) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * r * asin(min(1, sqrt(h)))
    }

    @Test("zoi and visited match a brute-force computation, per app, alone and combined", arguments: Backend.allCases)
    func membership(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        var generator = SeededGenerator(seed: 3030)
        let now = Date().timeIntervalSince1970
        let places = Self.places(&generator)
        let devices = Self.population(now: now, places: places, generator: &generator)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("zoi-aud-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let appsFile = try AppsTests.writeApps(into: directory)
        try await withService({
            $0.databaseURL = url.map { Secret($0) }
            $0.delivery.appsFile = appsFile
            $0.loadSamplePOIs = false
            $0.location.poiRegionsEnabled = false
            $0.location.detectVisits = false
        }) { client in
            #expect(try await client.post("/v1/pois", json: Self.poiDocument(places)).status == 200)
            var zones: [String: [Zone]] = [:]
            for device in devices {
                let items = device.stops.map { stop in
                    #"{"arrival":\#(stop.arrival),"departure":\#(stop.departure),"latitude":\#(stop.coordinate.latitude),"longitude":\#(stop.coordinate.longitude),"horizontal_accuracy":10}"#
                }
                let reply = try await client.post(
                    "/v1/devices/\(device.id)/visits", json: #"{"visits":[\#(items.joined(separator: ","))]}"#,
                    headers: ["Enrich-App": device.app])
                #expect(reply.json?["accepted"] == .int(Int64(device.stops.count)), "\(reply.text)")
                zones[device.id] = try await Self.zones(client, device)
            }
            let homes = zones.values.flatMap { $0 }.filter { $0.period == "HOME_PERIOD" }.count
            #expect(homes > 100, "the population should give most devices a home zone: \(homes)")

            func bruteZone(_ app: String, period: String, _ inside: (Coordinate) -> Bool) -> Set<String> {
                Set(
                    devices.filter { device in
                        device.app == app
                            && (zones[device.id] ?? []).contains { zone in
                                let holds =
                                    switch period {
                                    case "home": zone.period == "HOME_PERIOD"
                                    case "work": zone.period == "WORK_PERIOD"
                                    case "other": zone.period != "HOME_PERIOD" && zone.period != "WORK_PERIOD"
                                    default: true
                                    }
                                return holds && inside(zone.coordinate)
                            }
                    }.map(\.id))
            }
            func bruteVisited(_ app: String, _ chosen: [Place], radius: Double, from: Double, to: Double) -> Set<String>
            {
                Set(
                    devices.filter { device in
                        device.app == app
                            && device.stops.contains { stop in
                                stop.departure >= from && stop.arrival <= to
                                    && chosen.contains { Self.haversine($0.coordinate, stop.coordinate) <= radius }
                            }
                    }.map(\.id))
            }
            let polygon = [
                Coordinate(latitude: 48.83, longitude: 2.30), Coordinate(latitude: 48.84, longitude: 2.41),
                Coordinate(latitude: 48.89, longitude: 2.40), Coordinate(latitude: 48.875, longitude: 2.34),
                Coordinate(latitude: 48.88, longitude: 2.29),
            ]
            let polygonJSON = polygon.map { #"{"latitude":\#($0.latitude),"longitude":\#($0.longitude)}"# }
                .joined(separator: ",")
            let week = now - 7 * Self.day
            let cafes = places.filter { $0.type == "cafe" }
            let terraceGyms = places.filter { $0.type == "gym" && $0.tag == "terrace" }
            let near = { (c: Coordinate, r: Double) in { (p: Coordinate) in Self.haversine(c, p) <= r } }
            for app in ["consumer", "courier"] {
                let homeCircle = bruteZone(app, period: "home", near(Self.paris, 3_000))
                let workPolygon = bruteZone(app, period: "work") { Self.inPolygon($0, polygon) }
                let anyCircle = bruteZone(app, period: "any", near(Self.paris, 2_000))
                let otherCircle = bruteZone(app, period: "other", near(Self.paris, 5_000))
                let cafesWeek = bruteVisited(app, cafes, radius: 100, from: week, to: now)
                let gyms150 = bruteVisited(app, terraceGyms, radius: 150, from: now - 30 * Self.day, to: now)
                let onePOI = bruteVisited(app, [places[4]], radius: 100, from: now - 30 * Self.day, to: now)
                let between = bruteVisited(
                    app, places.filter { $0.tag == "wifi" }, radius: 120, from: now - 14 * Self.day,
                    to: now - 7 * Self.day)
                let cases: [(String, Set<String>)] = [
                    (
                        #"{"zoi":{"period":"home","latitude":\#(Self.paris.latitude),"longitude":\#(Self.paris.longitude),"radius_m":3000}}"#,
                        homeCircle
                    ),
                    (#"{"zoi":{"period":"work","polygon":[\#(polygonJSON)]}}"#, workPolygon),
                    (
                        #"{"zoi":{"latitude":\#(Self.paris.latitude),"longitude":\#(Self.paris.longitude),"radius_m":2000}}"#,
                        anyCircle
                    ),
                    (
                        #"{"zoi":{"period":"other","latitude":\#(Self.paris.latitude),"longitude":\#(Self.paris.longitude),"radius_m":5000}}"#,
                        otherCircle
                    ),
                    (#"{"visited":{"types":["cafe"]}}"#, cafesWeek),
                    (
                        #"{"visited":{"types":["gym"],"tags":["terrace"],"radius_m":150,"within_s":2592000}}"#,
                        gyms150
                    ),
                    (#"{"visited":{"poi_id":"p4","within_s":2592000}}"#, onePOI),
                    (
                        #"{"visited":{"query":"tag:\"wifi\"","radius_m":120,"since":\#(now - 14 * Self.day),"until":\#(now - 7 * Self.day)}}"#,
                        between
                    ),
                    (
                        #"{"all":[{"visited":{"types":["cafe"]}},{"not":{"zoi":{"period":"home","latitude":\#(Self.paris.latitude),"longitude":\#(Self.paris.longitude),"radius_m":3000}}}]}"#,
                        cafesWeek.subtracting(homeCircle)
                    ),
                    (
                        #"{"any":[{"zoi":{"period":"work","polygon":[\#(polygonJSON)]}},{"visited":{"poi_id":"p4","within_s":2592000}}]}"#,
                        workPolygon.union(onePOI)
                    ),
                ]
                for (audience, want) in cases {
                    let got = try await AudienceTests.preview(client, audience, app: app)
                    #expect(got == want, "\(backend) \(app) \(audience): \(got.symmetricDifference(want))")
                    if app == "consumer" {
                        #expect(!want.isEmpty, "a case that tests nothing: \(audience)")
                    }
                }
            }
        }
    }

    @Test("a zoi or visited audience that breaks a rule is refused with the path of the member at fault")
    func problems() async throws {
        try await withService { client in
            let cases: [(String, String)] = [
                (#"{"zoi":{"kind":"home"}}"#, "audience.zoi.kind"),
                (#"{"zoi":{"period":"holiday","latitude":1,"longitude":1,"radius_m":5}}"#, "audience.zoi.period"),
                (#"{"zoi":{"period":"home"}}"#, "audience.zoi"),
                (#"{"zoi":{"polygon":[{"latitude":1,"longitude":1}]}}"#, "audience.zoi.polygon"),
                (
                    #"{"zoi":{"polygon":[{"latitude":1,"longitude":-179},{"latitude":2,"longitude":179},{"latitude":3,"longitude":0}]}}"#,
                    "audience.zoi.polygon"
                ),
                (
                    #"{"zoi":{"polygon":[{"latitude":1},{"latitude":2,"longitude":1},{"latitude":3,"longitude":0}]}}"#,
                    "audience.zoi.polygon[0]"
                ),
                (#"{"visited":{}}"#, "audience.visited"),
                (#"{"visited":{"poi_id":"missing"}}"#, "audience.visited.poi_id"),
                (#"{"visited":{"types":[]}}"#, "audience.visited.types"),
                (#"{"visited":{"types":["cafe"],"radius_m":5000}}"#, "audience.visited.radius_m"),
                (#"{"visited":{"types":["cafe"],"within_s":10}}"#, "audience.visited.within_s"),
                (#"{"visited":{"types":["cafe"],"since":200,"until":100}}"#, "audience.visited.until"),
                (#"{"visited":{"types":["cafe"],"within_s":3600,"since":100}}"#, "audience.visited"),
                (#"{"visited":{"query":"type:"}}"#, "audience.visited.query"),
                (#"{"visited":{"types":["cafe"],"since":1000}}"#, "audience.visited.since"),
                (
                    #"{"zoi":{"polygon":[{"latitude":48,"longitude":1},{"latitude":48,"longitude":4.5},{"latitude":49,"longitude":2}]}}"#,
                    "audience.zoi.polygon"
                ),
            ]
            for (audience, path) in cases {
                let reply = try await client.post("/v1/audiences/preview", json: #"{"audience":\#(audience)}"#)
                #expect(reply.status == 400, "\(audience): \(reply.text)")
                #expect(reply.errorReason == "invalid_audience")
                #expect(reply.json?["error"]?["field"]?.stringValue == path, "\(audience): \(reply.text)")
            }
        }
    }
}
