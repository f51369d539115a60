import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Location audiences against a synthetic population (seeded): every answer checked against a brute-force
/// computation over the same generated data, on SQLite and PostgreSQL.
@Suite("Location audiences", .serialized)
struct AudienceTests {
    struct Device: Sendable {
        var id: String
        var app: String
        var coordinate: Coordinate
        var age: Double
        var accuracy: Double
    }

    static let paris = Coordinate(latitude: 48.8566, longitude: 2.3522)
    static let lyon = Coordinate(latitude: 45.7640, longitude: 4.8357)

    /// 400 devices of two apps around two cities, with fixes of every age and accuracy; some sit on cell edges.
    static func population(seed: UInt64 = 30) -> [Device] {
        var generator = SeededGenerator(seed: seed)
        var devices: [Device] = []
        for index in 0..<400 {
            let city = index % 3 == 0 ? lyon : paris
            let spread = Double.random(in: 0...0.03, using: &generator)
            let angle = Double.random(in: 0..<(2 * .pi), using: &generator)
            var latitude = city.latitude + spread * sin(angle)
            var longitude = city.longitude + spread * cos(angle) / cos(city.latitude * .pi / 180)
            if index % 17 == 0 {
                // On a cell boundary (0.01°), where a rounding slip would lose it.
                latitude = (latitude * 100).rounded() / 100
                longitude = (longitude * 100).rounded() / 100
            }
            devices.append(
                Device(
                    id: "d\(index)", app: index % 4 == 0 ? "courier" : "consumer",
                    coordinate: Coordinate(latitude: latitude, longitude: longitude),
                    age: Self.clearOfLimits(Double.random(in: 10...7_200, using: &generator)),
                    accuracy: Double.random(in: 3...900, using: &generator)))
        }
        return devices
    }

    /// An age kept two minutes clear of the age limits the tests use (1,800 s and 3,600 s): the service judges ages
    /// when it answers, a few seconds after the population was written, and a fix on the limit would flip.
    static func clearOfLimits(_ age: Double) -> Double {
        for limit in [1_800.0, 3_600.0] where abs(age - limit) < 120 { return age + 240 }
        return age
    }

    /// What `near` must hold, computed one device at a time.
    static func bruteNear(
        _ devices: [Device], app: String, center: Coordinate, radius: Double, maxAge: Double = 3_600,
        maxAccuracy: Double = 500
    ) -> Set<String> {
        Set(
            devices.filter {
                $0.app == app && $0.age <= maxAge && $0.accuracy <= maxAccuracy
                    && center.distance(to: $0.coordinate) <= radius
            }.map(\.id))
    }

    static func ingest(_ client: ServiceClient, _ devices: [Device], now: Double) async throws {
        for device in devices {
            // An older fix elsewhere first: only the last fix counts.
            let reply = try await client.post(
                "/v1/devices/\(device.id)/locations",
                json:
                    #"{"locations":[\#(fixItem(now - device.age - 600, lat: 10, lng: 10, accuracy: 5)),\#(fixItem(now - device.age, lat: device.coordinate.latitude, lng: device.coordinate.longitude, accuracy: device.accuracy))]}"#,
                headers: ["Enrich-App": device.app])
            #expect(reply.status == 200, "\(reply.text)")
        }
    }

    static func preview(_ client: ServiceClient, _ audience: String, app: String) async throws -> Set<String> {
        let reply = try await client.post(
            "/v1/audiences/preview", json: #"{"audience":\#(audience),"sample":1000}"#, headers: ["Enrich-App": app])
        #expect(reply.status == 200, "\(audience): \(reply.text)")
        guard case .array(let items)? = reply.json?["sample"] else { return [] }
        let ids = Set(items.compactMap(\.stringValue))
        #expect(reply.json?["count"] == .int(Int64(ids.count)))
        return ids
    }

    static func near(_ center: Coordinate, _ radius: Double, extra: String = "") -> String {
        #"{"near":{"latitude":\#(center.latitude),"longitude":\#(center.longitude),"radius_m":\#(radius)\#(extra)}}"#
    }

    @Test("near, in_region, all, any and not match a brute-force computation, per app", arguments: Backend.allCases)
    func membership(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        let devices = Self.population()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("audience-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The two apps (consumer, courier) of the apps tests.
        let appsFile = try AppsTests.writeApps(into: directory)
        try await withService({
            $0.databaseURL = url.map { Secret($0) }
            $0.delivery.appsFile = appsFile
        }) { client in
            let now = Date().timeIntervalSince1970
            try await Self.ingest(client, devices, now: now)
            let region = try await client.post(
                "/v1/regions",
                json:
                    #"{"id":"centre","latitude":\#(Self.paris.latitude),"longitude":\#(Self.paris.longitude),"radius":1200}"#,
                headers: ["Enrich-App": "consumer"])
            #expect(region.status == 201)
            let east = Coordinate(latitude: Self.paris.latitude, longitude: Self.paris.longitude + 0.015)
            for app in ["consumer", "courier"] {
                for radius in [300.0, 1_000, 2_500, 5_000] {
                    let got = try await Self.preview(client, Self.near(Self.paris, radius), app: app)
                    let want = Self.bruteNear(devices, app: app, center: Self.paris, radius: radius)
                    #expect(got == want, "\(backend) \(app) near \(radius): \(got.symmetricDifference(want))")
                }
                // Stricter age and accuracy.
                let strict = try await Self.preview(
                    client, Self.near(Self.lyon, 2_000, extra: #","max_fix_age_s":1800,"max_accuracy_m":100"#),
                    app: app)
                #expect(
                    strict
                        == Self.bruteNear(
                            devices, app: app, center: Self.lyon, radius: 2_000, maxAge: 1_800, maxAccuracy: 100))
            }
            let a = Self.bruteNear(devices, app: "consumer", center: Self.paris, radius: 2_000)
            let b = Self.bruteNear(devices, app: "consumer", center: east, radius: 1_500)
            let c = Self.bruteNear(devices, app: "consumer", center: Self.lyon, radius: 3_000)
            let inRegion = Self.bruteNear(devices, app: "consumer", center: Self.paris, radius: 1_200)
            let cases: [(String, Set<String>)] = [
                (#"{"in_region":"centre"}"#, inRegion),
                (#"{"all":[\#(Self.near(Self.paris, 2_000)),\#(Self.near(east, 1_500))]}"#, a.intersection(b)),
                (#"{"any":[\#(Self.near(Self.paris, 2_000)),\#(Self.near(Self.lyon, 3_000))]}"#, a.union(c)),
                (
                    #"{"all":[\#(Self.near(Self.paris, 2_000)),{"not":{"in_region":"centre"}}]}"#,
                    a.subtracting(inRegion)
                ),
                (
                    #"{"any":[{"all":[\#(Self.near(Self.paris, 2_000)),{"not":\#(Self.near(east, 1_500))}]},\#(Self.near(Self.lyon, 3_000))]}"#,
                    a.subtracting(b).union(c)
                ),
            ]
            for (audience, want) in cases {
                let got = try await Self.preview(client, audience, app: "consumer")
                #expect(got == want, "\(backend) \(audience): \(got.symmetricDifference(want))")
                #expect(!want.isEmpty, "a case that tests nothing: \(audience)")
            }
            // Another app's region is not this app's.
            let foreign = try await client.post(
                "/v1/audiences/preview", json: #"{"audience":{"in_region":"centre"}}"#,
                headers: ["Enrich-App": "courier"])
            #expect(foreign.errorReason == "invalid_audience")
            // Deleting a device takes it out of every audience.
            let member = try #require(a.sorted().first)
            #expect(try await client.delete("/v1/devices/\(member)", headers: ["Enrich-App": "consumer"]).status == 200)
            let after = try await Self.preview(client, Self.near(Self.paris, 2_000), app: "consumer")
            #expect(after == a.subtracting([member]))
        }
    }

    @Test(
        "in_region of a Wi-Fi region holds the devices whose last fix reported its network; of an 'either' region, those and the devices in its circle",
        arguments: Backend.allCases)
    func wifiRegion(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        try await withService({ $0.databaseURL = url.map { Secret($0) } }) { client in
            let depot = Coordinate(latitude: 45.75, longitude: 4.85)
            for (id, policy) in [("depot-wifi", "wifi"), ("depot-either", "either")] {
                let reply = try await client.post(
                    "/v1/regions",
                    json:
                        #"{"id":"\#(id)","latitude":\#(depot.latitude),"longitude":\#(depot.longitude),"radius":500,"wifi_ssid":"Depot-WiFi","policy":"\#(policy)"}"#
                )
                #expect(reply.status == 201, "\(reply.text)")
            }
            let now = Date().timeIntervalSince1970
            func report(_ device: String, _ items: [String]) async throws {
                let reply = try await client.post(
                    "/v1/devices/\(device)/locations", json: #"{"locations":[\#(items.joined(separator: ","))]}"#)
                #expect(reply.status == 200, "\(reply.text)")
            }
            let onNetwork = #","wifi_ssid":"Depot-WiFi""#
            // On the depot's network 10 km away (a Wi-Fi region by its rule, not its circle).
            for index in 0..<6 {
                try await report(
                    "w\(index)",
                    [fixItem(now - 30, lat: 45.84, lng: 4.85 + Double(index) * 0.001, accuracy: 5, extra: onNetwork)])
            }
            // Was on it, then left it: out.
            try await report(
                "w-left",
                [
                    fixItem(now - 60, lat: 45.84, lng: 4.85, accuracy: 5, extra: onNetwork),
                    fixItem(now - 30, lat: 45.84, lng: 4.86, accuracy: 5),
                ])
            // Another network: out.
            try await report(
                "w-other", [fixItem(now - 30, lat: 45.84, lng: 4.85, accuracy: 5, extra: #","wifi_ssid":"Cafe""#)])
            // In the circle without the network; far from both.
            for index in 0..<4 {
                try await report(
                    "c\(index)", [fixItem(now - 30, lat: 45.7505 + Double(index) * 0.0003, lng: 4.85, accuracy: 5)])
            }
            try await report("far", [fixItem(now - 30, lat: 45.70, lng: 4.70, accuracy: 5)])
            let wifi = Set((0..<6).map { "w\($0)" })
            let circle = Set((0..<4).map { "c\($0)" })
            #expect(try await Self.preview(client, #"{"in_region":"depot-wifi"}"#, app: "default") == wifi)
            #expect(
                try await Self.preview(client, #"{"in_region":"depot-either"}"#, app: "default") == wifi.union(circle))
            #expect(
                try await Self.preview(
                    client, #"{"all":[{"in_region":"depot-either"},{"not":{"in_region":"depot-wifi"}}]}"#,
                    app: "default")
                    == circle)
        }
    }

    @Test("an audience that breaks a rule is refused with the path of the member at fault")
    func problems() async throws {
        try await withService { client in
            let cases: [(String, String)] = [
                (#"{"near":{"latitude":48,"longitude":2}}"#, "audience.near.radius_m"),
                (#"{"near":{"latitude":48,"longitude":2,"radius_m":500000}}"#, "audience.near.radius_m"),
                (#"{"not":{"near":{"latitude":48,"longitude":2,"radius_m":5}}}"#, "audience.not"),
                (#"{"any":[{"not":{"near":{"latitude":1,"longitude":1,"radius_m":5}}}]}"#, "audience.any[0].not"),
                (#"{"in_region":"nowhere"}"#, "audience.in_region"),
                (#"{"near":{"poi_id":"missing","radius_m":5}}"#, "audience.near.poi_id"),
                (#"{"tags":["two words"]}"#, "audience.tags[0]"),
                (#"{"tags":[]}"#, "audience.tags"),
                (#"{"near":{},"any":[]}"#, "audience"),
            ]
            for (audience, path) in cases {
                let reply = try await client.post("/v1/audiences/preview", json: #"{"audience":\#(audience)}"#)
                #expect(reply.status == 400, "\(audience): \(reply.text)")
                #expect(reply.errorReason == "invalid_audience")
                #expect(reply.json?["error"]?["field"]?.stringValue == path, "\(audience): \(reply.text)")
            }
        }
    }

    @Test("a push to an audience reaches exactly the devices it holds that have a token, each enriched on its own")
    func pushToAudience() async throws {
        // The default app's devices (the service's own credentials).
        let devices = Self.population(seed: 31).prefix(120).map { device in
            var device = device
            device.app = "default"
            return device
        }
        try await withDelivery { client, mock, _ in
            let now = Date().timeIntervalSince1970
            try await Self.ingest(client, devices, now: now)
            // Every other device has a token.
            for (index, device) in devices.enumerated() where index % 2 == 0 {
                #expect(
                    try await register(
                        client, device.id, deviceToken(1000 + index), headers: ["Enrich-App": device.app]
                    ).status == 201)
            }
            let want = Self.bruteNear(devices, app: "default", center: Self.paris, radius: 2_000)
            let reply = try await client.post(
                "/v1/push",
                json:
                    #"{"audience":\#(Self.near(Self.paris, 2_000)),"payload":\#(locationPayload(timestamp: "\(Int64(now))")),"wait":true}"#
            )
            #expect(reply.status == 200, "\(reply.text)")
            let withToken = Set(devices.enumerated().filter { $0.offset % 2 == 0 }.map(\.element.id))
            #expect(reply.json?["counts"]?["delivered"] == .int(Int64(want.intersection(withToken).count)))
            let tokens = Set(mock.receivedPushes.map(\.deviceToken))
            let expectedTokens = Set(
                devices.enumerated().filter { want.contains($0.element.id) && $0.offset % 2 == 0 }
                    .map { deviceToken(1000 + $0.offset) })
            #expect(tokens == expectedTokens)
            // An audience that holds nobody sends nothing, and says so.
            let empty = try await client.post(
                "/v1/push",
                json:
                    #"{"audience":\#(Self.near(Coordinate(latitude: 0, longitude: 0), 10)),"payload":\#(locationPayload(timestamp: "\(Int64(now))"))}"#
            )
            #expect(empty.status == 422)
            #expect(empty.errorReason == "audience_empty")
        }
    }
}
