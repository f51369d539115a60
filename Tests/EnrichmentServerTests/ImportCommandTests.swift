import EnrichmentCore
import EnrichmentStorage
import Essentials
import Foundation
import TestSupport
import Testing

@Suite("enrichment-server import-pois (the real executable)")
struct ImportCommandTests {
    /// Runs the executable; returns exit status, stdout and stderr.
    static func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try runProgram(try ServerProcess.executableURL(), arguments)
    }

    @Test("a GeoNames file loads with --map geonames; skipped rows are counted by reason; all rows are stored")
    func geonames() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let csv = directory.appendingPathComponent("rg_cities1000.csv")
        var rows = ["lat,lon,name,admin1,admin2,cc"]
        for i in 0..<2_000 {
            rows.append("\(Double(i % 170) - 85 + 0.5),\(Double(i % 359) - 179 + 0.25),Place \(i),Region \(i % 7),,XX")
        }
        rows += [",10,No lat,,,XX", "10,,No lng,,,XX", "100,10,North of north,,,XX", "10,abc,Letters,,,XX"]
        try Data((rows.joined(separator: "\n") + "\n").utf8).write(to: csv)
        let database = directory.appendingPathComponent("db.sqlite").path

        let refused = try Self.run(["import-pois", csv.path, "--db", database])
        #expect(refused.status != 0)
        #expect(refused.err.contains("--map geonames"))

        let result = try Self.run(["import-pois", csv.path, "--db", database, "--map", "geonames", "--json"])
        #expect(result.status == 0, "\(result.err)")
        let report = try JSONValue.decode(Data(result.out.utf8))
        #expect(report["upserted"] == .int(2_000))
        #expect(report["total"] == .int(2_000))
        #expect(report["rejected_count"] == .int(4))
        #expect(
            report["rejected_by_reason"]
                == .object([
                    "lat is empty": .int(1), "lng is empty": .int(1),
                    "lat is outside [-90, 90]": .int(1), "lng is not a decimal number": .int(1),
                ]))

        let store = SQLitePOIStore(database: try SQLiteDatabase(path: database))
        let stored = try await store.all()
        #expect(stored.count == 2_000)
        let third = try #require(stored.first { $0.storeId == "gn-3" })
        #expect(third.name == "Place 2")
        #expect(third.userProperties == .object(["admin1": .string("Region 2")]))

        let human = try Self.run(["import-pois", csv.path, "--db", database, "--map", "geonames"])
        #expect(human.out.contains("Upserted 2000 POIs"))
        #expect(human.out.contains("skipped 1: lng is not a decimal number (first at line 2005: 'abc')"))
        #expect(try await store.count() == 2_000, "a second import upserts by store id")
    }
}
