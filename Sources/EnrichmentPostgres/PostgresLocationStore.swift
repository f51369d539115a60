import EnrichmentCore
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
