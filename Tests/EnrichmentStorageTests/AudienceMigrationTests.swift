import EnrichmentCore
import Essentials
import Foundation
import GRDB
import LocationCore
import Testing

@testable import EnrichmentStorage

/// A database made before audiences read zones and visits (schema v9) gets its zones' centres and its visits'
/// cells from the migration, so that `zoi` and `visited` find what was stored before.
@Suite("SQLite: zones and visits stored before v10 are found after it")
struct AudienceMigrationTests {
    static func zone(_ id: String, _ period: String?, latitude: Double, longitude: Double) -> ZoneOfInterest {
        ZoneOfInterest(
            id: id, meanX: SphericalMercator.lon2x(longitude), meanY: SphericalMercator.lat2y(latitude),
            inverse: [1 / 40_000, 0, 0, 1 / 40_000], det: 1.6e9, prior: 0.5, accumulator: 12, age: 0,
            visitIds: ["\(id)-v"], startTime: 1_000, endTime: 90_000, duration: 36_000,
            weeklyDensity: Array(repeating: 0, count: 168), period: period, wktPolygon: "")
    }

    @Test("the v10 migration fills the zones' centres and cells (in pages) and the visits' cells")
    func backfill() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mig-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("old.sqlite").path
        // 10,005 zones: more than one page of the migration.
        let count = 10_005
        do {
            let pool = try DatabasePool(path: path)
            try SQLiteDatabase.migrator.migrate(pool, upTo: "v9-schedule")
            try await pool.write { db in
                let insert = try db.makeStatement(
                    sql: "INSERT INTO zois (device_id, position, id, period, body) VALUES (?, ?, ?, ?, ?)")
                for index in 0..<count {
                    let zoi = Self.zone(
                        "z\(index)", index % 2 == 0 ? ZOIPeriod.home : nil, latitude: 48.80 + Double(index) * 1e-5,
                        longitude: 2.30)
                    try insert.execute(arguments: [
                        "d\(index / 2)", index % 2, zoi.id, zoi.period, LocationCodec.encode(zoi),
                    ])
                }
                try db.execute(
                    sql: """
                        INSERT INTO visits (device_id, id, arrival, departure, latitude, longitude,
                                            horizontal_accuracy, recorded_at, source)
                        VALUES ('v1', 'a', 100, 200, 45.7640, 4.8357, 10, 200, 'reported')
                        """)
            }
            try pool.close()
        }
        let database = try SQLiteDatabase(path: path)
        let store = SQLiteLocationStore(database: database)
        // Every zone is found in its own cell, with its centre as the SDK computes it.
        let all = try await store.zoneCentres(
            inCells: AudienceArea.circle(center: Coordinate(latitude: 48.85, longitude: 2.30), radius: 8_000)
                .cellRanges)
        #expect(all.count == count)
        let first = try #require(all.first { $0.deviceId == "d0" && $0.period == ZOIPeriod.home })
        #expect(abs(first.coordinate.latitude - 48.80) < 1e-9)
        #expect(abs(first.coordinate.longitude - 2.30) < 1e-9)
        let cells = try await database.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT latitude, longitude, cell FROM zois")
        }
        #expect(
            cells.allSatisfy { row in
                (row[2] as Int64) == LastFixCells.cell(latitude: row[0], longitude: row[1])
            })
        // The visit is in its fine cell, and found there.
        let visits = try await store.visitPlaces(
            inCells: VisitCells.grid.ranges(center: Coordinate(latitude: 45.7640, longitude: 4.8357), radius: 50),
            from: 0, to: 1_000)
        #expect(visits.map(\.deviceId) == ["v1"])
    }
}
