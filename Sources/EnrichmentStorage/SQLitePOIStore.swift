public import EnrichmentCore
import Essentials
import Foundation
import GRDB

/// POIs in SQLite with an R*Tree over their coordinates, upserted by store id.
public struct SQLitePOIStore: POIStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    static let upsertSQL = """
        INSERT INTO pois (store_id, name, latitude, longitude, address_lines, city, zipcode, country_code,
                          types, tags, contact, user_properties, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (store_id) DO UPDATE SET
            name = excluded.name, latitude = excluded.latitude, longitude = excluded.longitude,
            address_lines = excluded.address_lines, city = excluded.city, zipcode = excluded.zipcode,
            country_code = excluded.country_code, types = excluded.types, tags = excluded.tags,
            contact = excluded.contact, user_properties = excluded.user_properties,
            updated_at = excluded.updated_at
        """

    static func write(_ pois: [POI], with statement: Statement, at now: Double) throws {
        for poi in pois {
            let row = StoredPOI.Row(poi)
            try statement.execute(arguments: [
                row.storeId, row.name, row.latitude, row.longitude, row.addressLines, row.city, row.zipcode,
                row.countryCode, row.types, row.tags, row.contact, row.userProperties, now,
            ])
        }
    }

    public func upsert(_ pois: [POI]) async throws -> Int {
        guard !pois.isEmpty else { return 0 }
        let now = Date().timeIntervalSince1970
        return try await database.pool.write { db in
            try Self.write(pois, with: try db.cachedStatement(sql: Self.upsertSQL), at: now)
            return pois.count
        }
    }

    public func upsert(chunks: POIChunks) async throws -> Int {
        let now = Date().timeIntervalSince1970
        do {
            return try await database.pool.write { db in
                let statement = try db.cachedStatement(sql: Self.upsertSQL)
                var written = 0
                while let chunk = try chunks.next() {
                    try Self.write(chunk, with: statement, at: now)
                    written += chunk.count
                }
                return written
            }
        } catch {
            chunks.cancel()
            throw error
        }
    }

    public func all() async throws -> [POI] {
        try await database.pool.read { db in
            try Row.fetchAll(db, sql: "\(Self.columns) FROM pois ORDER BY id").map(Self.poi)
        }
    }

    public func indexBuilder() async throws -> PlacesIndex.Builder {
        try await database.pool.read { db in
            var builder = PlacesIndex.Builder(expected: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pois") ?? 0)
            let rows = try Row.fetchCursor(db, sql: "\(Self.columns) FROM pois ORDER BY id")
            while let row = try rows.next() { builder.add(try Self.poi(row)) }
            return builder
        }
    }

    public func count() async throws -> Int {
        try await database.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pois") ?? 0 }
    }

    /// Exact nearest-k through the R*Tree (`StoredPOI.nearest`: widening boxes, haversine ranking).
    public func nearest(to point: Coordinate, query: PlacesQuery) async throws -> [PlaceMatch] {
        guard query.limit > 0 else { return [] }
        let total = try await count()
        return try await StoredPOI.nearest(
            to: point, query: query, total: total,
            candidates: { box in
                try await database.pool.read { db in
                    var found: [StoredPOI.Candidate] = []
                    for lngRange in box.longitudes {
                        let rows = try Row.fetchCursor(
                            db,
                            sql: """
                                SELECT pois.id, pois.store_id, pois.latitude, pois.longitude
                                FROM poi_rtree r JOIN pois ON pois.id = r.id
                                WHERE r.max_lat >= ? AND r.min_lat <= ? AND r.max_lng >= ? AND r.min_lng <= ?
                                """, arguments: [box.minLat, box.maxLat, lngRange.lowerBound, lngRange.upperBound])
                        while let row = try rows.next() { found.append((row[0], row[1], row[2], row[3])) }
                    }
                    return found
                }
            },
            rows: { ids in try await database.pool.read { db in try Self.pois(db, ids: ids) } })
    }

    public func poi(storeId: String) async throws -> POI? {
        try await database.pool.read { db in
            try Row.fetchOne(db, sql: "\(Self.columns) FROM pois WHERE store_id = ?", arguments: [storeId]).map(
                Self.poi)
        }
    }

    public func delete(storeIds: [String]) async throws -> Int {
        try await database.pool.write { db in
            var removed = 0
            for id in Set(storeIds) {
                try db.execute(sql: "DELETE FROM pois WHERE store_id = ?", arguments: [id])
                removed += db.changesCount
            }
            return removed
        }
    }

    /// Full POIs for row ids.
    static func pois(_ db: Database, ids: [Int64]) throws -> [Int64: POI] {
        let marks = Array(repeating: "?", count: ids.count).joined(separator: ",")
        var found: [Int64: POI] = [:]
        for row in try Row.fetchAll(
            db, sql: "\(columns), pois.id FROM pois WHERE pois.id IN (\(marks))",
            arguments: StatementArguments(ids))
        {
            found[row[12]] = try poi(row)
        }
        return found
    }

    static let columns = """
        SELECT pois.store_id, pois.name, pois.latitude, pois.longitude, pois.address_lines, pois.city, pois.zipcode,
               pois.country_code, pois.types, pois.tags, pois.contact, pois.user_properties
        """

    static func poi(_ row: Row) throws -> POI {
        try StoredPOI.Row(
            storeId: row[0], name: row[1], latitude: row[2], longitude: row[3], addressLines: row[4], city: row[5],
            zipcode: row[6], countryCode: row[7], types: row[8], tags: row[9], contact: row[10],
            userProperties: row[11]
        ).poi()
    }
}
