public import EnrichmentCore
import Essentials
public import LocationCore
import Logging
import PostgresNIO

/// Visits, ZOIs, regions, region state and location events in PostgreSQL. A device's read-compute-write runs in
/// one transaction holding a per-device advisory lock, so runs of one device never interleave across nodes.
public final class PostgresLocationStore: LocationStore {
    let database: PostgresBackend

    /// The times of devices evaluated since their row was last written (or that have none), on this node, up to a
    /// budget. With several nodes a late fix reaching a node that did not evaluate the newer one is evaluated when
    /// the device has no row (docs/LOCATION-RULES.md §4.5 rule 5).
    let volatile: RegionStateTimes

    public init(database: PostgresBackend, deviceMemory: Int = 200_000) {
        self.database = database
        volatile = RegionStateTimes(capacity: deviceMemory)
    }

    var logger: Logger { database.logger }

    static func visits(_ connection: PostgresConnection, deviceId: String, logger: Logger) async throws -> [Visit] {
        let rows = try await connection.run(
            """
            SELECT id, arrival, departure, latitude, longitude, horizontal_accuracy, recorded_at, source
            FROM visits WHERE device_id = \(deviceId) ORDER BY seq
            """, logger: logger)
        var visits: [Visit] = []
        for try await (id, arrival, departure, lat, lng, accuracy, recorded, source) in rows.decode(
            (String, Double, Double, Double, Double, Double, Double, String).self)
        {
            visits.append(
                Visit(
                    id: id, deviceId: deviceId, arrival: arrival, departure: departure, latitude: lat, longitude: lng,
                    horizontalAccuracy: accuracy, recordedAt: recorded, source: source))
        }
        return visits
    }

    static func zois(_ connection: PostgresConnection, deviceId: String, logger: Logger) async throws
        -> [ZoneOfInterest]
    {
        let rows = try await connection.run(
            "SELECT body FROM zois WHERE device_id = \(deviceId) ORDER BY position", logger: logger)
        var zois: [ZoneOfInterest] = []
        for try await body in rows.decode(String.self) { zois.append(try LocationCodec.zoi(body)) }
        return zois
    }

    static func replaceZOIs(
        _ connection: PostgresConnection, deviceId: String, _ zois: [ZoneOfInterest], logger: Logger
    ) async throws {
        try await connection.run("DELETE FROM zois WHERE device_id = \(deviceId)", logger: logger)
        try await insertZOIs(
            connection, deviceIds: Array(repeating: deviceId, count: zois.count), positions: Array(zois.indices), zois,
            logger: logger)
    }

    /// Inserts zones (of one device or many, `deviceIds` and `positions` row by row), with their centres and
    /// LastFixCells cells, in one statement.
    static func insertZOIs(
        _ connection: PostgresConnection, deviceIds: [String], positions: [Int], _ zois: [ZoneOfInterest],
        logger: Logger
    ) async throws {
        guard !zois.isEmpty else { return }
        let periods = zois.map { $0.period ?? "" }
        try await connection.run(
            """
            INSERT INTO zois (device_id, position, id, period, body, latitude, longitude, cell)
            SELECT d, o, i, NULLIF(p, ''), b, la, lo, c
            FROM unnest(\(deviceIds)::text[], \(positions)::int8[], \(zois.map(\.id))::text[], \(periods)::text[],
                        \(zois.map(LocationCodec.encode))::text[], \(zois.map(\.latitude))::float8[],
                        \(zois.map(\.longitude))::float8[],
                        \(zois.map { LastFixCells.cell(latitude: $0.latitude, longitude: $0.longitude) })::int8[])
                 AS u(d, o, i, p, b, la, lo, c)
            """, logger: logger)
    }

    /// Appends visits (of one device or many, `deviceIds` row by row), with their VisitCells cells, in one
    /// statement, in order.
    static func insertVisits(
        _ connection: PostgresConnection, deviceIds: [String], _ v: [Visit], logger: Logger
    ) async throws {
        guard !v.isEmpty else { return }
        try await connection.run(
            """
            INSERT INTO visits (device_id, id, arrival, departure, latitude, longitude, horizontal_accuracy,
                                recorded_at, source, cell)
            SELECT dv, i, a, d, la, lo, h, r, s, c
            FROM unnest(\(deviceIds)::text[], \(v.map(\.id))::text[], \(v.map(\.arrival))::float8[],
                        \(v.map(\.departure))::float8[], \(v.map(\.latitude))::float8[], \(v.map(\.longitude))::float8[],
                        \(v.map(\.horizontalAccuracy))::float8[], \(v.map(\.recordedAt))::float8[],
                        \(v.map(\.source))::text[],
                        \(v.map { VisitCells.cell(latitude: $0.latitude, longitude: $0.longitude) })::int8[])
                 WITH ORDINALITY AS u(dv, i, a, d, la, lo, h, r, s, c, n)
            ORDER BY n
            """, logger: logger)
    }

    static func append(_ connection: PostgresConnection, _ events: [LocationEvent], logger: Logger) async throws {
        guard !events.isEmpty else { return }
        try await connection.run(
            """
            INSERT INTO location_events (device_id, date, body)
            SELECT d, t, b FROM unnest(\(events.map(\.deviceId))::text[], \(events.map(\.date))::float8[],
                                       \(events.map(LocationCodec.encode))::text[]) WITH ORDINALITY AS u(d, t, b, n)
            ORDER BY n
            """, logger: logger)
    }

    /// A transaction whose body's own error comes out as it was thrown (not wrapped by postgres-nio).
    func transaction<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> sending T
    ) async throws -> sending T {
        try await database.withTransaction(isolation: isolation, body)
    }

    /// Holds `key` until the transaction ends.
    static func lock(_ connection: PostgresConnection, _ key: String, logger: Logger) async throws {
        try await connection.run("SELECT pg_advisory_xact_lock(hashtext(\(key)))", logger: logger)
    }

    public func updateVisits<T: Sendable>(
        deviceId: String, _ body: @Sendable (DeviceVisits) throws -> (DeviceVisitsChange, T)
    ) async throws -> T {
        try await transaction { connection in
            try await Self.lock(connection, "visits:\(deviceId)", logger: logger)
            let state = DeviceVisits(
                visits: try await Self.visits(connection, deviceId: deviceId, logger: logger),
                zois: try await Self.zois(connection, deviceId: deviceId, logger: logger))
            let (change, result) = try body(state)
            try await Self.insertVisits(
                connection, deviceIds: Array(repeating: deviceId, count: change.newVisits.count), change.newVisits,
                logger: logger)
            if change.zois != state.zois {
                try await Self.replaceZOIs(connection, deviceId: deviceId, change.zois, logger: logger)
            }
            try await Self.append(connection, change.events, logger: logger)
            return result
        }
    }

    /// Loads history computed elsewhere (a migration from another system, a benchmark's population) in bulk: for
    /// each device, appends its visits and replaces its zones, storing exactly what `updateVisits` stores for a
    /// run whose change has these visits and zones (the same rows, cells and encoding), in one transaction for the
    /// whole chunk: the devices' advisory locks (those `updateVisits` takes) in one statement, then one delete and
    /// two multi-row inserts. It does not run the visit pipeline: nothing is detected, clustered or classified, no
    /// location event is written, and a device's existing visits are neither read nor merged (a visit id it
    /// already has fails the chunk). A device listed twice keeps the zones of its last entry. A chunk of a few
    /// thousand devices takes as many advisory locks (PostgreSQL's lock table holds `max_locks_per_transaction`
    /// times `max_connections`, 6,400 by default, across all transactions).
    public func importHistory(_ devices: [(deviceId: String, visits: [Visit], zois: [ZoneOfInterest])]) async throws {
        guard !devices.isEmpty else { return }
        var last: [String: Int] = [:]
        for (index, device) in devices.enumerated() { last[device.deviceId] = index }
        let ids = last.keys.sorted()
        var visitDevices: [String] = []
        var visits: [Visit] = []
        var zoneDevices: [String] = []
        var positions: [Int] = []
        var zones: [ZoneOfInterest] = []
        for (index, device) in devices.enumerated() {
            visitDevices.append(contentsOf: repeatElement(device.deviceId, count: device.visits.count))
            visits.append(contentsOf: device.visits)
            guard last[device.deviceId] == index else { continue }
            zoneDevices.append(contentsOf: repeatElement(device.deviceId, count: device.zois.count))
            positions.append(contentsOf: device.zois.indices)
            zones.append(contentsOf: device.zois)
        }
        try await transaction { [visitDevices, visits, zoneDevices, positions, zones] connection in
            try await connection.run(
                """
                SELECT pg_advisory_xact_lock(hashtext('visits:' || id))
                FROM unnest(\(ids)::text[]) WITH ORDINALITY AS u(id, n) ORDER BY n
                """, logger: logger)
            try await Self.insertVisits(connection, deviceIds: visitDevices, visits, logger: logger)
            try await connection.run("DELETE FROM zois WHERE device_id = ANY(\(ids)::text[])", logger: logger)
            try await Self.insertZOIs(
                connection, deviceIds: zoneDevices, positions: positions, zones, logger: logger)
        }
    }

    public func visits(deviceId: String) async throws -> [Visit] {
        try await database.withConnection { try await Self.visits($0, deviceId: deviceId, logger: logger) }
    }

    public func zois(deviceId: String) async throws -> [ZoneOfInterest] {
        try await database.withConnection { try await Self.zois($0, deviceId: deviceId, logger: logger) }
    }

    public func knowsDevice(_ deviceId: String) async throws -> Bool {
        let rows = try await database.query(
            """
            SELECT EXISTS (SELECT 1 FROM visits WHERE device_id = \(deviceId))
                OR EXISTS (SELECT 1 FROM zois WHERE device_id = \(deviceId))
                OR EXISTS (SELECT 1 FROM region_state WHERE device_id = \(deviceId))
                OR EXISTS (SELECT 1 FROM location_events WHERE device_id = \(deviceId))
                OR EXISTS (SELECT 1 FROM fixes WHERE device_id = \(deviceId))
            """)
        return try await rows.decode(Bool.self).first { _ in true } ?? false
    }

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

    /// The last fix, the region state and the home/work zones of each device, in one statement (what one
    /// enrichment reads: one trip to the database instead of two). No transaction and no lock: a read only.
    public func readSnapshots(deviceIds: [String]) async throws -> (
        fixes: [String: LocationFix], states: [String: DeviceRegionState], zones: [String: [ZoneOfInterest]]
    ) {
        let ids = Array(Set(deviceIds))
        guard !ids.isEmpty else { return ([:], [:], [:]) }
        let logger = self.logger
        return try await database.withConnection { connection in
            let rows = try await connection.execute(SnapshotStatement(ids: ids), logger: logger)
            var fixes: [String: LocationFix] = [:]
            var states: [String: DeviceRegionState] = [:]
            var zones: [String: [ZoneOfInterest]] = [:]
            for try await (id, kind, body, _, time, lat, lng, accuracy, context, received, extras) in rows {
                switch kind {
                case 2:
                    guard let time, let lat, let lng, let received else { continue }
                    fixes[id] = PostgresFixStore.fix(
                        id: id, time: time, latitude: lat, longitude: lng, accuracy: accuracy, context: context,
                        received: received, extras: extras)
                case 0: states[id] = try LocationCodec.regionState(body ?? "")
                default: zones[id, default: []].append(try LocationCodec.zoi(body ?? ""))
                }
            }
            return (fixes, states, zones)
        }
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

    public func events(deviceId: String, limit: Int) async throws -> [LocationEvent] {
        let rows = try await database.query(
            "SELECT body FROM location_events WHERE device_id = \(deviceId) ORDER BY date, seq LIMIT \(limit)")
        var events: [LocationEvent] = []
        for try await body in rows.decode(String.self) { events.append(try LocationCodec.event(body)) }
        return events
    }

    public func expire(
        recordedAtOrBefore cutoff: Double,
        _ apply: @Sendable ([ZoneOfInterest], Set<String>, [Visit]) -> [ZoneOfInterest]
    ) async throws -> (visits: Int, events: Int) {
        let deviceRows = try await database.query(
            "SELECT DISTINCT device_id FROM visits WHERE recorded_at <= \(cutoff)")
        var devices: [String] = []
        for try await id in deviceRows.decode(String.self) { devices.append(id) }
        var removed = 0
        for device in devices {
            removed += try await transaction { connection in
                try await Self.lock(connection, "visits:\(device)", logger: logger)
                let visits = try await Self.visits(connection, deviceId: device, logger: logger)
                let expiring = Set(visits.filter { $0.recordedAt <= cutoff }.map(\.id))
                let remaining = visits.filter { $0.recordedAt > cutoff }
                let zois = try await Self.zois(connection, deviceId: device, logger: logger)
                try await Self.replaceZOIs(
                    connection, deviceId: device, apply(zois, expiring, remaining), logger: logger)
                let rows = try await connection.run(
                    "DELETE FROM visits WHERE device_id = \(device) AND recorded_at <= \(cutoff) RETURNING 1",
                    logger: logger)
                var count = 0
                for try await _ in rows { count += 1 }
                return count
            }
        }
        let eventRows = try await database.query(
            "WITH gone AS (DELETE FROM location_events WHERE date <= \(cutoff) RETURNING 1) SELECT count(*) FROM gone")
        let events = try await eventRows.decode(Int.self).first { _ in true } ?? 0
        return (removed, events)
    }

    public func deleteLocationData(deviceId: String) async throws -> Int {
        try await transaction { connection in
            var removed = 0
            for table in ["visits", "zois", "region_state", "location_events"] {
                let rows = try await connection.run(
                    PostgresQuery(
                        unsafeSQL:
                            "WITH gone AS (DELETE FROM \(table) WHERE device_id = $1 RETURNING 1) SELECT count(*) FROM gone",
                        binds: {
                            var binds = PostgresBindings()
                            binds.append(deviceId)
                            return binds
                        }()), logger: logger)
                removed += try await rows.decode(Int.self).first { _ in true } ?? 0
            }
            return removed
        }
    }
}

/// The snapshot read, prepared once per connection (PostgreSQL plans it once instead of per batch).
struct SnapshotStatement: PostgresPreparedStatement {
    static let name = "enrich_device_snapshots_v2"
    /// The last fix of each device is one probe of the primary key, backwards (`LIMIT 1` per device): its cost
    /// does not grow with the device's history, and no table statistics can turn it into a scan.
    static let sql = """
        SELECT u.id, 2::int8 AS kind, NULL::text AS body, 0::int8 AS position,
               f.fix_time, f.latitude, f.longitude, f.horizontal_accuracy, f.context, f.received_at, f.extras
        FROM unnest($1::text[]) AS u(id)
        CROSS JOIN LATERAL (
            SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras FROM fixes
            WHERE device_id = u.id ORDER BY fix_time DESC LIMIT 1) AS f
        UNION ALL
        SELECT device_id, 0::int8, body, 0::int8, NULL::float8, NULL::float8, NULL::float8, NULL::float8,
               NULL::text, NULL::float8, NULL::text
        FROM region_state WHERE device_id = ANY($1::text[])
        UNION ALL
        SELECT device_id, 1::int8, body, position::int8, NULL::float8, NULL::float8, NULL::float8, NULL::float8,
               NULL::text, NULL::float8, NULL::text
        FROM zois WHERE device_id = ANY($1::text[]) AND period IN ('HOME_PERIOD', 'WORK_PERIOD')
        ORDER BY 1, 2, 4
        """
    typealias Row = (String, Int, String?, Int, Double?, Double?, Double?, Double?, String?, Double?, String?)

    var ids: [String]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(ids)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

extension PostgresLocationStore: AudienceHistory {
    // Each cell range is read through the cell index (`LATERAL ... OFFSET 0`, which the planner cannot flatten
    // into a join it might answer by scanning the table, as it did for last fixes on a table not analysed yet).
    public func zoneCentres(inCells ranges: [ClosedRange<Int64>]) async throws -> [ZoneCentre] {
        guard !ranges.isEmpty else { return [] }
        // Packed (`PackedRows`): each line the device id, then a tab and the period when it has one.
        let rows = try await database.bulkRead(
            """
            SELECT string_agg(z.device_id || coalesce(E'\\t' || z.period, ''), E'\\n'),
                   string_agg(float8send(z.latitude) || float8send(z.longitude), ''::bytea)
            FROM unnest(\(ranges.map(\.lowerBound))::int8[], \(ranges.map(\.upperBound))::int8[]) AS r(lo, hi)
            CROSS JOIN LATERAL (
                SELECT device_id, period, latitude, longitude FROM zois WHERE cell BETWEEN r.lo AND r.hi OFFSET 0
            ) AS z
            """)
        var found: [ZoneCentre] = []
        try await PackedRows.forEach(rows, doubles: 2) { line, values in
            let tab = line.utf8.firstIndex(of: UInt8(ascii: "\t"))
            found.append(
                ZoneCentre(
                    deviceId: String(line[..<(tab ?? line.endIndex)]),
                    period: tab.map { String(line[line.utf8.index(after: $0)...]) },
                    coordinate: Coordinate(latitude: values[0], longitude: values[1])))
        }
        return found
    }

    public func visitPlaces(inCells ranges: [ClosedRange<Int64>], from: Double, to: Double) async throws
        -> [VisitPlace]
    {
        guard !ranges.isEmpty else { return [] }
        let rows = try await database.bulkRead(
            """
            SELECT string_agg(v.device_id, E'\\n'),
                   string_agg(float8send(v.latitude) || float8send(v.longitude) || float8send(v.arrival)
                              || float8send(v.departure), ''::bytea)
            FROM unnest(\(ranges.map(\.lowerBound))::int8[], \(ranges.map(\.upperBound))::int8[]) AS r(lo, hi)
            CROSS JOIN LATERAL (
                SELECT device_id, latitude, longitude, arrival, departure FROM visits
                WHERE cell BETWEEN r.lo AND r.hi OFFSET 0
            ) AS v
            WHERE v.departure >= \(from) AND v.arrival <= \(to)
            """)
        var found: [VisitPlace] = []
        try await PackedRows.forEach(rows, doubles: 4) { id, values in
            found.append(
                VisitPlace(
                    deviceId: String(id), coordinate: Coordinate(latitude: values[0], longitude: values[1]),
                    arrival: values[2], departure: values[3]))
        }
        return found
    }
}
