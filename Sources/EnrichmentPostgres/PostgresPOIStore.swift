public import EnrichmentCore
import Foundation
import Logging
import PostgresNIO

// POIs in PostgreSQL (`PostgresPOIStore`), and the changes to them a follower applies (`POIChange`).

/// One change to the POIs, as a follower applies it.
public enum POIChange: Sendable, Equatable {
    case upsert(POI)
    /// The store id of a deleted POI.
    case delete(String)
}

/// POIs in PostgreSQL, upserted by store id, searched through a GiST index over their coordinates.
public struct PostgresPOIStore: POIStore {
    let database: PostgresBackend

    public init(database: PostgresBackend) { self.database = database }

    public func upsert(_ pois: [POI]) async throws -> Int {
        guard !pois.isEmpty else { return 0 }
        let now = Date().timeIntervalSince1970
        // In chunks, all in one transaction (all or nothing, like SQLite's).
        try await database.withTransaction { connection in
            // One import at a time across nodes, so POI versions become visible in the order they were taken.
            try await connection.run(
                "SELECT pg_advisory_xact_lock(\(Self.importLock))", logger: database.logger)
            try await Self.write(pois, on: connection, at: now, logger: database.logger)
            try await PostgresChangeFeed.notify(.pois, on: connection, logger: database.logger)
        }
        return pois.count
    }

    public func upsert(chunks: POIChunks) async throws -> Int {
        let now = Date().timeIntervalSince1970
        do {
            return try await database.withTransaction { connection in
                try await connection.run(
                    "SELECT pg_advisory_xact_lock(\(Self.importLock))", logger: database.logger)
                var written = 0
                // `next` waits for the reading thread (never a task of this pool).
                while let chunk = try chunks.next() {
                    try await Self.write(chunk, on: connection, at: now, logger: database.logger)
                    written += chunk.count
                }
                try await PostgresChangeFeed.notify(.pois, on: connection, logger: database.logger)
                return written
            }
        } catch {
            chunks.cancel()
            throw error
        }
    }

    /// Upserts `pois` in statements of 5,000 rows on `connection` (inside the caller's transaction).
    static func write(_ pois: [POI], on connection: PostgresConnection, at now: Double, logger: Logger) async throws {
        // A repeated store id: the later one wins, as a second upsert would.
        var last: [String: Int] = [:]
        for (index, poi) in pois.enumerated() { last[poi.storeId] = index }
        let rows = last.values.sorted().map { StoredPOI.Row(pois[$0]) }
        for start in stride(from: 0, to: rows.count, by: 5_000) {
            let chunk = Array(rows[start..<min(rows.count, start + 5_000)])
            let optional = { (values: [String?]) in values.map { $0 ?? "" } }
            let present = { (values: [String?]) in values.map { $0 != nil } }
            try await connection.run(
                """
                INSERT INTO pois (store_id, name, latitude, longitude, address_lines, city, zipcode, country_code,
                                  types, tags, contact, user_properties, updated_at)
                SELECT s, n, la, lo, al, CASE WHEN hci THEN ci END, CASE WHEN hz THEN z END,
                       CASE WHEN hcc THEN cc END, ty, ta, CASE WHEN hco THEN co END, CASE WHEN hu THEN u END,
                       \(now)
                FROM unnest(\(chunk.map(\.storeId))::text[], \(chunk.map(\.name))::text[],
                            \(chunk.map(\.latitude))::float8[], \(chunk.map(\.longitude))::float8[],
                            \(chunk.map { $0.addressLines ?? "[]" })::text[],
                            \(optional(chunk.map(\.city)))::text[], \(present(chunk.map(\.city)))::bool[],
                            \(optional(chunk.map(\.zipcode)))::text[], \(present(chunk.map(\.zipcode)))::bool[],
                            \(optional(chunk.map(\.countryCode)))::text[],
                            \(present(chunk.map(\.countryCode)))::bool[],
                            \(chunk.map { $0.types ?? "[]" })::text[], \(chunk.map { $0.tags ?? "[]" })::text[],
                            \(optional(chunk.map(\.contact)))::text[], \(present(chunk.map(\.contact)))::bool[],
                            \(optional(chunk.map(\.userProperties)))::text[],
                            \(present(chunk.map(\.userProperties)))::bool[])
                     AS v(s, n, la, lo, al, ci, hci, z, hz, cc, hcc, ty, ta, co, hco, u, hu)
                ON CONFLICT (store_id) DO UPDATE SET
                    name = excluded.name, latitude = excluded.latitude, longitude = excluded.longitude,
                    address_lines = excluded.address_lines, city = excluded.city, zipcode = excluded.zipcode,
                    country_code = excluded.country_code, types = excluded.types, tags = excluded.tags,
                    contact = excluded.contact, user_properties = excluded.user_properties,
                    updated_at = excluded.updated_at, version = nextval('pois_version')
                """, logger: logger)
        }
    }

    /// The lock POI imports take for their transaction ("poi" in ASCII).
    static let importLock: Int64 = 0x706f69

    static let columns = """
        SELECT store_id, name, latitude, longitude, address_lines, city, zipcode, country_code, types, tags, contact,
               user_properties, id FROM pois
        """

    /// The newest POI version written so far, by an upsert or a delete (0 for none).
    public func currentVersion() async throws -> Int64 {
        try await database.query(
            """
            SELECT GREATEST((SELECT COALESCE(max(version), 0) FROM pois),
                            (SELECT COALESCE(max(version), 0) FROM poi_deletions))::int8
            """
        ).decode(Int64.self).first { _ in true } ?? 0
    }

    /// The POI changes after `version` in version order (at most about `limit` of each kind), with the version
    /// they bring a follower to: apply them in order and ask again from that version.
    public func changes(after version: Int64, limit: Int = 10_000) async throws -> (
        changes: [POIChange], version: Int64
    ) {
        let upserts = try await Self.rows(
            database.query(
                """
                SELECT store_id, name, latitude, longitude, address_lines, city, zipcode, country_code, types, tags,
                       contact, user_properties, version FROM pois
                WHERE version > \(version) ORDER BY version LIMIT \(limit)
                """))
        var deletes: [(Int64, String)] = []
        for try await row in try await database.query(
            "SELECT version, store_id FROM poi_deletions WHERE version > \(version) ORDER BY version LIMIT \(limit)"
        ).decode((Int64, String).self) {
            deletes.append(row)
        }
        // A list cut at the limit is complete only up to its last version.
        var reached = max(upserts.last?.0 ?? version, deletes.last?.0 ?? version)
        if upserts.count >= limit { reached = min(reached, upserts.last!.0) }
        if deletes.count >= limit { reached = min(reached, deletes.last!.0) }
        var merged: [(Int64, POIChange)] =
            upserts.filter { $0.0 <= reached }.map { ($0.0, .upsert($0.1)) }
        merged += deletes.filter { $0.0 <= reached }.map { ($0.0, .delete($0.1)) }
        merged.sort { $0.0 < $1.0 }
        return (merged.map(\.1), reached)
    }

    static func rows(_ sequence: some AsyncSequence<PostgresRow, any Error>) async throws -> [(Int64, POI)] {
        var found: [(Int64, POI)] = []
        try await each(sequence) { found.append(($0, $1)) }
        return found
    }

    /// Decodes the rows one at a time.
    static func each(_ sequence: some AsyncSequence<PostgresRow, any Error>, _ body: (Int64, POI) throws -> Void)
        async throws
    {
        for try await row in sequence {
            let (storeId, name, lat, lng, lines, city, zipcode, country, types, tags, contact, user, id) =
                try row.decode(
                    (
                        String, String, Double, Double, String?, String?, String?, String?, String?, String?,
                        String?, String?, Int64
                    ).self)
            let poi = try StoredPOI.Row(
                storeId: storeId, name: name, latitude: lat, longitude: lng, addressLines: lines, city: city,
                zipcode: zipcode, countryCode: country, types: types, tags: tags, contact: contact,
                userProperties: user
            ).poi()
            try body(id, poi)
        }
    }

    public func indexBuilder() async throws -> PlacesIndex.Builder {
        var builder = PlacesIndex.Builder(expected: try await count(), uniqueIds: true)
        // Streamed (a catalogue of millions), on one connection.
        let logger = database.logger
        try await database.withConnection { connection in
            try await Self.each(connection.run("\(unescaped: Self.columns) ORDER BY id", logger: logger)) {
                builder.add($1)
            }
        }
        return builder
    }

    public func all() async throws -> [POI] {
        try await Self.rows(database.query("\(unescaped: Self.columns) ORDER BY id")).map(\.1)
    }

    public func count() async throws -> Int {
        try await database.query("SELECT count(*) FROM pois").decode(Int.self).first { _ in true } ?? 0
    }

    public func poi(storeId: String) async throws -> POI? {
        try await Self.rows(database.query("\(unescaped: Self.columns) WHERE store_id = \(storeId)")).first?.1
    }

    /// Removes POIs by store id, leaving a tombstone per POI with the next version (under the import lock, so
    /// versions become visible in order): every node's follower removes them from its in-memory index.
    public func delete(storeIds: [String]) async throws -> Int {
        let ids = Array(Set(storeIds))
        return try await database.withTransaction { connection in
            try await connection.run("SELECT pg_advisory_xact_lock(\(Self.importLock))", logger: database.logger)
            let rows = try await connection.run(
                """
                WITH gone AS (DELETE FROM pois WHERE store_id = ANY(\(ids)::text[]) RETURNING store_id),
                     marked AS (INSERT INTO poi_deletions (version, store_id)
                                SELECT nextval('pois_version'), store_id FROM gone RETURNING 1)
                SELECT count(*)::int8 FROM marked
                """, logger: database.logger)
            let removed = try await rows.decode(Int64.self).first { _ in true } ?? 0
            if removed > 0 { try await PostgresChangeFeed.notify(.pois, on: connection, logger: database.logger) }
            return Int(removed)
        }
    }

    /// Exact nearest-k: candidates from the GiST index (`point <@ box`), ranked by haversine metres.
    public func nearest(to point: Coordinate, query: PlacesQuery) async throws -> [PlaceMatch] {
        guard query.limit > 0 else { return [] }
        let total = try await count()
        let database = self.database
        return try await StoredPOI.nearest(
            to: point, query: query, total: total,
            candidates: { box in
                var found: [StoredPOI.Candidate] = []
                for range in box.longitudes {
                    let rows = try await database.query(
                        """
                        SELECT id, store_id, latitude, longitude FROM pois
                        WHERE point(longitude, latitude) <@ box(point(\(range.lowerBound), \(box.minLat)),
                                                                 point(\(range.upperBound), \(box.maxLat)))
                        """)
                    for try await candidate in rows.decode((Int64, String, Double, Double).self) {
                        found.append(candidate)
                    }
                }
                return found
            },
            rows: { ids in
                let rows = try await database.query("\(unescaped: Self.columns) WHERE id = ANY(\(ids)::int8[])")
                return Dictionary(try await Self.rows(rows), uniquingKeysWith: { first, _ in first })
            })
    }
}
