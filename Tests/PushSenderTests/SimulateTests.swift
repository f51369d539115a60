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
}
