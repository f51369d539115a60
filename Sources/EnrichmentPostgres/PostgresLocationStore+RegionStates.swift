public import LocationCore
import PostgresNIO

/// Regions and each device's region state: the regions as defined, and the states read and written under the
/// devices' advisory locks (the home and work zones read with them).
extension PostgresLocationStore {
    public func putRegion(_ region: Region) async throws -> Bool {
        let rows = try await database.query(
            """
            INSERT INTO regions (id, body) VALUES (\(region.id), \(LocationCodec.encode(region)))
            ON CONFLICT (id) DO UPDATE SET body = excluded.body
            RETURNING (xmax = 0)
            """)
        let created = try await rows.decode(Bool.self).first { _ in true } ?? false
        try await PostgresChangeFeed.notify(.regions, database: database)
        return created
    }

    public func regions() async throws -> [Region] {
        let rows = try await database.query("SELECT body FROM regions ORDER BY id")
        var regions: [Region] = []
        for try await body in rows.decode(String.self) { regions.append(try LocationCodec.region(body)) }
        return regions
    }

    public func deleteRegion(id: String) async throws -> Bool {
        let rows = try await database.query("DELETE FROM regions WHERE id = \(id) RETURNING 1")
        var removed = false
        for try await _ in rows { removed = true }
        if removed { try await PostgresChangeFeed.notify(.regions, database: database) }
        return removed
    }

    public func updateRegionStates<T: Sendable>(
        deviceIds: [String],
        _ body:
            @Sendable ([String: DeviceRegionState], [String: [ZoneOfInterest]]) throws -> (
                [String: DeviceRegionState], [LocationEvent], T
            )
    ) async throws -> T {
        let ids = Array(Set(deviceIds)).sorted()
        return try await transaction { connection in
            // Every device's lock in one statement, in sorted order (two batches over the same devices take them in
            // one order); then the reads, in a statement of their own so that they see what the lock waited for.
            try await connection.run(
                """
                SELECT pg_advisory_xact_lock(hashtext('regions:' || id))
                FROM unnest(\(ids)::text[]) WITH ORDINALITY AS u(id, n) ORDER BY n
                """, logger: logger)
            let (stored, zones) = try await Self.readRegionStates(
                connection.run(Self.regionStatesQuery(ids), logger: logger))
            // The in-memory times over what is stored.
            let states = volatile.merged(stored, ids: ids)
            let (updated, events, result) = try body(states, zones)
            let plan = RegionStateWrites(
                stored: stored, read: states, updated: updated, eventDevices: Set(events.map(\.deviceId)))
            if !plan.upserts.isEmpty {
                try await connection.run(
                    """
                    INSERT INTO region_state (device_id, body)
                    SELECT * FROM unnest(\(plan.upserts.map(\.0))::text[], \(plan.upserts.map { LocationCodec.encode($0.1) })::text[])
                    ON CONFLICT (device_id) DO UPDATE SET body = excluded.body
                    """, logger: logger)
            }
            if !plan.deletes.isEmpty {
                try await connection.run(
                    "DELETE FROM region_state WHERE device_id = ANY(\(plan.deletes)::text[])", logger: logger)
            }
            volatile.apply(plan)
            try await Self.append(connection, events, logger: logger)
            return result
        }
    }

    public func readRegionStates(deviceIds: [String]) async throws -> (
        states: [String: DeviceRegionState], zones: [String: [ZoneOfInterest]]
    ) {
        let ids = Array(Set(deviceIds))
        guard !ids.isEmpty else { return ([:], [:]) }
        // One statement, no transaction and no lock.
        return try await Self.readRegionStates(database.query(Self.regionStatesQuery(ids), logger: logger))
    }

    public func storedRegionStateCount() async throws -> Int {
        let rows = try await database.query("SELECT count(*)::int8 FROM region_state", logger: logger)
        return try await rows.decode(Int.self).first { _ in true } ?? 0
    }

    /// The region states and the home/work zones of `ids` in one statement.
    static func regionStatesQuery(_ ids: [String]) -> PostgresQuery {
        """
        SELECT device_id, 0::int8 AS kind, body, 0::int8 AS position FROM region_state
        WHERE device_id = ANY(\(ids)::text[])
        UNION ALL
        SELECT device_id, 1::int8, body, position::int8 FROM zois
        WHERE device_id = ANY(\(ids)::text[]) AND period IN ('HOME_PERIOD', 'WORK_PERIOD')
        ORDER BY 1, 2, 4
        """
    }

    static func readRegionStates(_ rows: some AsyncSequence<PostgresRow, any Error>) async throws -> (
        states: [String: DeviceRegionState], zones: [String: [ZoneOfInterest]]
    ) {
        var states: [String: DeviceRegionState] = [:]
        var zones: [String: [ZoneOfInterest]] = [:]
        for try await (id, kind, text, _) in rows.decode((String, Int, String, Int).self) {
            if kind == 0 {
                states[id] = try LocationCodec.regionState(text)
            } else {
                zones[id, default: []].append(try LocationCodec.zoi(text))
            }
        }
        return (states, zones)
    }
}
