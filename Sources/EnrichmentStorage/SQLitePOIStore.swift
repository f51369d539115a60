public import EnrichmentCore
import Essentials
import Foundation
import GRDB
import GRDBSQLite

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

    /// Straight from SQLite's column bytes into the packed index: no `POI`, no `String` per row, and the table
    /// read in two halves side by side (1M rows in about a second on 2 cores; docs/OPERATIONS.md, "Start-up").
    public func indexBuilder() async throws -> PlacesIndex.Builder {
        let (low, high, total) = try await database.pool.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT min(id), max(id), count(*) FROM pois")
            return (row?[0] as Int64? ?? 0, row?[1] as Int64? ?? 0, row?[2] as Int? ?? 0)
        }
        let middle = low + (high - low) / 2
        async let first = scan(from: low, to: middle, expected: total / 2)
        async let second = scan(from: middle + 1, to: high, expected: total / 2)
        var builder = try await first
        builder.add(contentsOf: try await second)
        return builder
    }

    /// The rows with `from <= id <= to`, packed as read.
    func scan(from: Int64, to: Int64, expected: Int) async throws -> PlacesIndex.Builder {
        try await database.pool.read { db in
            // store_id is UNIQUE: nothing to look up while gathering.
            var builder = PlacesIndex.Builder(expected: expected, uniqueIds: true)
            let statement = try db.makeStatement(
                sql: "\(Self.columns) FROM pois WHERE id BETWEEN ? AND ? ORDER BY id")
            try statement.setArguments([from, to])
            let handle = statement.sqliteStatement
            defer { sqlite3_reset(handle) }
            func text(_ column: Int32) -> UnsafeBufferPointer<UInt8>? {
                guard sqlite3_column_type(handle, column) != SQLITE_NULL,
                    let start = sqlite3_column_text(handle, column)
                else { return nil }
                return UnsafeBufferPointer(start: start, count: Int(sqlite3_column_bytes(handle, column)))
            }
            let empty = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
            while true {
                let code = sqlite3_step(handle)
                if code == SQLITE_DONE { break }
                guard code == SQLITE_ROW else {
                    throw DatabaseError(
                        resultCode: ResultCode(rawValue: code),
                        message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
                }
                builder.add(
                    raw: RawPOIRow(
                        latitude: sqlite3_column_double(handle, 2), longitude: sqlite3_column_double(handle, 3),
                        storeId: text(0) ?? empty, name: text(1) ?? empty, city: text(5), zipcode: text(6),
                        countryCode: text(7), addressLines: text(4), types: text(8), tags: text(9), contact: text(10),
                        userProperties: text(11)))
            }
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
