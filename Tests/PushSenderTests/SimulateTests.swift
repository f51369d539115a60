import Essentials
import Foundation
import TestSupport
import Testing

@Suite("push-sender simulate in process (the real executables)")
struct SimulateTests {
    @Test("exit statuses as check; --lat/--lng give a fix for the run only")
    func simulate() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let csv = directory.appendingPathComponent("pois.csv")
        try Data("store_id,name,lat,lng\np1,Tour Eiffel,48.8584,2.2945\n".utf8).write(to: csv)
        let database = directory.appendingPathComponent("db.sqlite").path
        let importer = Process()
        let server: URL = try #require(builtExecutable(named: "enrichment-server"))
        importer.executableURL = server
        importer.arguments = ["import-pois", csv.path, "--db", database]
        importer.standardOutput = FileHandle.nullDevice
        try importer.run()
        importer.waitUntilExit()
        #expect(importer.terminationStatus == 0)

        let near = ["--device", "qa-1", "--db", database, "--lat", "48.8590", "--lng", "2.2950"]
        let page = directory.appendingPathComponent("preview.html").path
        let fresh = try runPushSender(["simulate", "payloads/location.json", "--stamp-now", "--html", page] + near)
        #expect(fresh.status == 0, "\(fresh.err)")
        #expect(fresh.out.contains("Tour Eiffel"))
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.contains("<svg") && html.contains("id=\"body\">Tour Eiffel is "))
        #expect(fresh.out.contains("outcome: enriched (nearest_poi)"))
        let stale = try runPushSender(["simulate", "payloads/stale.json"] + near)
        #expect(stale.status == 1)
        #expect(stale.out.contains("outcome: stale"))
        let missing = try runPushSender(["simulate", "payloads/missing-timestamp.json"] + near)
        #expect(missing.status == 2)
        let invalid = try runPushSender(["simulate", "-"] + near, stdin: "[1]")
        #expect(invalid.status == 3)
        // Nothing was stored: without --lat/--lng the device has no fix.
        let none = try runPushSender(
            ["simulate", "payloads/location.json", "--stamp-now", "--device", "qa-1", "--db", database])
        #expect(none.status == 0)
        #expect(none.out.contains("outcome: no_fix"))
        #expect(
            try runPushSender(["simulate", "payloads/location.json", "--device", "qa-1", "--lat", "1"]).status == 64)
    }

    /// The sample POIs' names and coordinates, read from the GeoJSON file as shipped (not through the service).
    static func samplePOIs() throws -> [(name: String, latitude: Double, longitude: Double)] {
        let url = repositoryRoot.appendingPathComponent("Sources/EnrichmentRuntime/Resources/sample-pois.geojson")
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any]
        let features = try #require(document?["features"] as? [[String: Any]])
        return features.compactMap { feature in
            guard let name = (feature["properties"] as? [String: Any])?["name"] as? String,
                let coordinates = (feature["geometry"] as? [String: Any])?["coordinates"] as? [Double],
                coordinates.count == 2
            else { return nil }
            return (name, coordinates[1], coordinates[0])
        }
    }

    @Test("in a fresh folder, --lat/--lng alone simulate against the built-in sample POIs; no device, no database")
    func anywhere() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fresh-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let payload = repositoryRoot.appendingPathComponent("payloads/location.json").path
        // No ENRICH_* from the test's own environment: a new user's shell.
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("ENRICH_") }
        let (lat, lng) = (48.8584, 2.2945)
        let result = try runPushSender(
            ["simulate", payload, "--lat", "\(lat)", "--lng", "\(lng)", "--stamp-now", "--json"], in: folder,
            environment: environment)
        #expect(result.status == 0, "\(result.err)")
        let answer = try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any]
        let nearest = (answer?["pois"] as? [[String: Any]])?.first?["name"] as? String
        // The expected nearest by a plain haversine over the shipped file.
        func metres(_ a: (Double, Double), _ b: (Double, Double)) -> Double {
            let rad = Double.pi / 180
            let dLat = (b.0 - a.0) * rad
            let dLng = (b.1 - a.1) * rad
            let h = sin(dLat / 2) * sin(dLat / 2) + cos(a.0 * rad) * cos(b.0 * rad) * sin(dLng / 2) * sin(dLng / 2)
            return 2 * 6_371_008.8 * asin(min(1, h.squareRoot()))
        }
        let expected = try Self.samplePOIs().min { metres((lat, lng), ($0.1, $0.2)) < metres((lat, lng), ($1.1, $1.2)) }
        #expect(nearest != nil && nearest == expected?.name, "\(result.out.prefix(500))")
        #expect(answer?["outcome"] as? String == "enriched", "\(result.out.prefix(300))")
        // Nothing was left in the folder.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        // Without a fix and without a service, it says what to give.
        let lost = try runPushSender(["simulate", payload, "--device", "me"], in: folder, environment: environment)
        #expect(lost.status != 0)
        #expect(lost.err.contains("--lat and --lng"), "\(lost.err)")
        let nothing = try runPushSender(["simulate", payload], in: folder, environment: environment)
        #expect(nothing.status == 64)
        #expect(nothing.err.contains("--device"), "\(nothing.err)")
    }

    @Test("--android shows the FCM message an Android device would get: the iPhone's body and map, the rest as data")
    func android() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("android-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let payload = repositoryRoot.appendingPathComponent("payloads/location.json").path
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("ENRICH_") }
        let arguments = ["simulate", payload, "--lat", "48.8584", "--lng", "2.2945", "--stamp-now", "--json"]
        let ios = try runPushSender(arguments, in: folder, environment: environment)
        let android = try runPushSender(arguments + ["--android"], in: folder, environment: environment)
        #expect(android.status == 0, "\(android.err)")
        let result = try JSONParser.parse(Array(ios.out.utf8))
        let message = try JSONParser.parse(Array(android.out.utf8))["message"]
        #expect(message?["notification"]?["body"] == result["payload"]?["aps"]?["alert"]?["body"])
        #expect(message?["notification"]?["title"] == result["payload"]?["aps"]?["alert"]?["title"])
        #expect(message?["notification"]?["image"] == result["payload"]?["attachment-url"])
        #expect(message?["data"]?["subtitle"] == result["payload"]?["aps"]?["alert"]?["subtitle"])
        #expect(message?["data"]?["attachment-url"] == nil)
        let shown = try runPushSender(Array(arguments.dropLast()) + ["--android"], in: folder, environment: environment)
        #expect(shown.out.contains("Android (FCM HTTP v1):"))
    }
}
