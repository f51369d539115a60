public import EnrichmentCore
import Essentials
import GRDB
public import LocationCore
import Synchronization

/// Visits, ZOIs, regions, region state and location events in SQLite. A visit run reads, computes and writes in
/// one write transaction, which SQLite serialises. Region evaluation reads outside the writer and computes under a
/// per-device lock (this process owns the file), and writes only what changed.
///
/// What changes on every batch but matters little (the last fix time evaluated, the detector's position) is kept
/// in memory and written with the device's next real change: after a crash a device may evaluate a late, older
/// fix once more and the detector reads a little more (its visits have stable ids, so none is stored twice).
public final class SQLiteLocationStore: LocationStore {
    let database: SQLiteDatabase
    let deviceLocks = KeyedAsyncLock()
    /// The times of devices evaluated since their row was last written (or that have none), up to a budget.
    let volatile: RegionStateTimes

    /// `deviceMemory`: the devices whose evaluation times are kept in memory (docs/CONFIGURATION.md,
    /// `ENRICH_DEVICE_MEMORY`); a device past it is read back from its row, or has its next late fix evaluated.
    /// Devices that may have a region-state row or classified (home/work) zones; the others are not read when
    /// their fixes are evaluated (this process owns the file, so it sees every write that adds one). Nil: not
    /// known (it could not be read at start, or grew past `deviceMemory`): every device is read.
    let withState: Mutex<Set<String>?>
    let deviceMemory: Int

    public init(database: SQLiteDatabase, deviceMemory: Int = 200_000) {
        self.database = database
        self.deviceMemory = deviceMemory
        volatile = RegionStateTimes(capacity: deviceMemory)
        let known = try? database.pool.read { db in
            try Set(
                String.fetchAll(
                    db,
                    sql: """
                        SELECT device_id FROM region_state
                        UNION SELECT device_id FROM zois WHERE period IN ('HOME_PERIOD', 'WORK_PERIOD')
                        LIMIT ?
                        """, arguments: [deviceMemory + 1]))
        }
        withState = Mutex(known.flatMap { $0.count > deviceMemory ? nil : $0 })
    }

    /// Notes devices that now have state (after the write that gave it to them committed).
    func noteState(_ ids: some Sequence<String>) {
        withState.withLock { known in
            guard known != nil else { return }
            for id in ids { known!.insert(id) }
            if known!.count > deviceMemory { known = nil }
        }
    }

    static func visits(_ db: Database, deviceId: String) throws -> [Visit] {
        let statement = try db.cachedStatement(
            sql: """
                SELECT id, arrival, departure, latitude, longitude, horizontal_accuracy, recorded_at, source
                FROM visits WHERE device_id = ? ORDER BY seq
                """)
        return try Row.fetchAll(statement, arguments: [deviceId]).map { row in
            Visit(
                id: row[0], deviceId: deviceId, arrival: row[1], departure: row[2], latitude: row[3],
                longitude: row[4], horizontalAccuracy: row[5], recordedAt: row[6], source: row[7])
        }
    }

    static func zois(_ db: Database, deviceId: String) throws -> [ZoneOfInterest] {
        let statement = try db.cachedStatement(sql: "SELECT body FROM zois WHERE device_id = ? ORDER BY position")
        return try String.fetchAll(statement, arguments: [deviceId]).map(LocationCodec.zoi)
    }

    static func replaceZOIs(_ db: Database, deviceId: String, _ zois: [ZoneOfInterest]) throws {
        try db.execute(sql: "DELETE FROM zois WHERE device_id = ?", arguments: [deviceId])
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO zois (device_id, position, id, period, body, latitude, longitude, cell)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for (position, zoi) in zois.enumerated() {
            let (latitude, longitude) = (zoi.latitude, zoi.longitude)
            try insert.execute(arguments: [
                deviceId, position, zoi.id, zoi.period, LocationCodec.encode(zoi), latitude, longitude,
                LastFixCells.cell(latitude: latitude, longitude: longitude),
            ])
        }
    }

    static func append(_ db: Database, _ events: [LocationEvent]) throws {
        guard !events.isEmpty else { return }
        let insert = try db.cachedStatement(
            sql: "INSERT INTO location_events (device_id, date, body) VALUES (?, ?, ?)")
        for event in events {
            try insert.execute(arguments: [event.deviceId, event.date, LocationCodec.encode(event)])
        }
    }

    /// Appends visits of a device, with their VisitCells cells.
    static func insertVisits(_ db: Database, deviceId: String, _ visits: [Visit]) throws {
        try insertVisits(db, visits.map { (seq: nil, deviceId: deviceId, visit: $0) })
    }

    /// Appends visits, each with its VisitCells cell, in the order given; a nil `seq` takes the next one.
    static func insertVisits(_ db: Database, _ rows: [(seq: Int64?, deviceId: String, visit: Visit)]) throws {
        guard !rows.isEmpty else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO visits (seq, device_id, id, arrival, departure, latitude, longitude,
                                    horizontal_accuracy, recorded_at, source, cell)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for (seq, deviceId, v) in rows {
            try insert.execute(arguments: [
                seq, deviceId, v.id, v.arrival, v.departure, v.latitude, v.longitude, v.horizontalAccuracy,
                v.recordedAt, v.source, VisitCells.cell(latitude: v.latitude, longitude: v.longitude),
            ])
        }
    }

    public func updateVisits<T: Sendable>(
        deviceId: String, _ body: @Sendable (DeviceVisits) throws -> (DeviceVisitsChange, T)
    ) async throws -> T {
        let (result, classified) = try await database.pool.write { db in
            let state = DeviceVisits(
                visits: try Self.visits(db, deviceId: deviceId), zois: try Self.zois(db, deviceId: deviceId))
            let (change, result) = try body(state)
            try Self.insertVisits(db, deviceId: deviceId, change.newVisits)
            if change.zois != state.zois { try Self.replaceZOIs(db, deviceId: deviceId, change.zois) }
            try Self.append(db, change.events)
            return (result, change.zois.contains { $0.period == ZOIPeriod.home || $0.period == ZOIPeriod.work })
        }
        if classified { noteState([deviceId]) }
        return result
    }

    /// The writer's page cache during `importHistory`, KiB.
    static let importCacheKiB = 128 * 1024

    /// Loads history computed elsewhere (a migration from another system, a benchmark's population) in bulk: for
    /// each device, appends its visits and replaces its zones, storing exactly what `updateVisits` stores for a
    /// run whose change has these visits and zones (the same rows, cells and encoding), in one write transaction
    /// for the whole chunk. It does not run the visit pipeline: nothing is detected, clustered or classified, no
    /// location event is written, and a device's existing visits are neither read nor merged (a visit id it
    /// already has fails the chunk). A device listed twice keeps the zones of its last entry.
    public func importHistory(_ devices: [(deviceId: String, visits: [Visit], zois: [ZoneOfInterest])]) async throws {
        guard !devices.isEmpty else { return }
        let classified = try await database.pool.writeWithoutTransaction { db in
            // A visit lands at a random place in `visits_by_cell`: one by one, nearly every row read and wrote an
            // index page through the kernel (48% of a load's profile, SQLite's page cache being 2 MB). In cell
            // order, the chunk's rows walk the index once; the larger cache, given back afterwards, keeps the
            // pages a chunk dirties in memory until it commits.
            let cacheSize = try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? -2_000
            try db.execute(sql: "PRAGMA cache_size = \(-Self.importCacheKiB)")
            defer { try? db.execute(sql: "PRAGMA cache_size = \(cacheSize)") }
            var classified: [String] = []
            try db.inTransaction {
                // `seq` (a device's visits are read in its order) numbered in the order given, rows written in
                // cell order.
                let base = try Int64.fetchOne(db, sql: "SELECT max(seq) FROM visits") ?? 0
                let rows = devices.flatMap { device in device.visits.map { (device.deviceId, $0) } }
                    .enumerated().map { index, entry in
                        (
                            cell: VisitCells.cell(latitude: entry.1.latitude, longitude: entry.1.longitude),
                            row: (seq: Int64?.some(base + 1 + Int64(index)), deviceId: entry.0, visit: entry.1)
                        )
                    }
                try Self.insertVisits(db, rows.sorted { $0.cell < $1.cell }.map(\.row))
                for device in devices {
                    try Self.replaceZOIs(db, deviceId: device.deviceId, device.zois)
                    if device.zois.contains(where: { $0.period == ZOIPeriod.home || $0.period == ZOIPeriod.work }) {
                        classified.append(device.deviceId)
                    }
                }
                return .commit
            }
            return classified
        }
        noteState(classified)
    }

    public func visits(deviceId: String) async throws -> [Visit] {
        try await database.pool.read { db in try Self.visits(db, deviceId: deviceId) }
    }

    public func zois(deviceId: String) async throws -> [ZoneOfInterest] {
        try await database.pool.read { db in try Self.zois(db, deviceId: deviceId) }
    }

    public func knowsDevice(_ deviceId: String) async throws -> Bool {
        try await database.pool.read { db in
            for table in ["visits", "zois", "region_state", "location_events", "fixes"] {
                if try Bool.fetchOne(
                    db, sql: "SELECT EXISTS (SELECT 1 FROM \(table) WHERE device_id = ?)", arguments: [deviceId])
                    == true
                {
                    return true
                }
            }
            return false
        }
    }

    public func putRegion(_ region: Region) async throws -> Bool {
        try await database.pool.write { db in
            let existed =
                try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM regions WHERE id = ?)", arguments: [region.id])
                ?? false
            try db.execute(
                sql: "INSERT INTO regions (id, body) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body",
                arguments: [region.id, LocationCodec.encode(region)])
            return !existed
        }
    }

    public func regions() async throws -> [Region] {
        try await database.pool.read { db in
            try String.fetchAll(db, sql: "SELECT body FROM regions ORDER BY id").map(LocationCodec.region)
        }
    }

    public func deleteRegion(id: String) async throws -> Bool {
        try await database.pool.write { db in
            try db.execute(sql: "DELETE FROM regions WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    public func updateRegionStates<T: Sendable>(
        deviceIds: [String],
        _ body:
            @Sendable ([String: DeviceRegionState], [String: [ZoneOfInterest]]) throws -> (
                [String: DeviceRegionState], [LocationEvent], T
            )
    ) async throws -> T {
        let ids = Array(Set(deviceIds))
        return try await deviceLocks.withLocks(ids) {
            // Devices known to have neither a row nor zones are not read (most devices, most of the time).
            let toRead = withState.withLock { known in known.map { known in ids.filter(known.contains) } } ?? ids
            let (stored, zones) = try await Self.read(database, toRead)
            // The in-memory times over what is stored.
            let states = volatile.merged(stored, ids: ids)
            let (updated, events, result) = try body(states, zones)
            let plan = RegionStateWrites(
                stored: stored, read: states, updated: updated, eventDevices: Set(events.map(\.deviceId)))
            if !plan.upserts.isEmpty || !plan.deletes.isEmpty || !events.isEmpty {
                try await database.pool.write { db in
                    let write = try db.cachedStatement(
                        sql: """
                            INSERT INTO region_state (device_id, body) VALUES (?, ?)
                            ON CONFLICT (device_id) DO UPDATE SET body = excluded.body
                            """)
                    for (id, state) in plan.upserts { try write.execute(arguments: [id, LocationCodec.encode(state)]) }
                    let delete = try db.cachedStatement(sql: "DELETE FROM region_state WHERE device_id = ?")
                    for id in plan.deletes { try delete.execute(arguments: [id]) }
                    try Self.append(db, events)
                }
            }
            volatile.apply(plan)
            noteState(plan.upserts.map(\.0))
            let gone = plan.deletes.filter { zones[$0]?.isEmpty ?? true }
            if !gone.isEmpty { withState.withLock { known in for id in gone { known?.remove(id) } } }
            return result
        }
    }

    public func storedRegionStateCount() async throws -> Int {
        try await database.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM region_state") ?? 0 }
    }

    /// The region states and classified zones of `ids` (none read when there are none).
    static func read(_ database: SQLiteDatabase, _ ids: [String]) async throws -> (
        [String: DeviceRegionState], [String: [ZoneOfInterest]]
    ) {
        guard !ids.isEmpty else { return ([:], [:]) }
        return try await database.pool.read { db in
            var states: [String: DeviceRegionState] = [:]
            var zones: [String: [ZoneOfInterest]] = [:]
            let readState = try db.cachedStatement(sql: "SELECT body FROM region_state WHERE device_id = ?")
            let readZones = try db.cachedStatement(
                sql: """
                    SELECT body FROM zois WHERE device_id = ? AND period IN ('HOME_PERIOD', 'WORK_PERIOD')
                    ORDER BY position
                    """)
            for id in ids {
                if let text = try String.fetchOne(readState, arguments: [id]) {
                    states[id] = try LocationCodec.regionState(text)
                }
                let classified = try String.fetchAll(readZones, arguments: [id])
                if !classified.isEmpty { zones[id] = try classified.map(LocationCodec.zoi) }
            }
            return (states, zones)
        }
    }

    public func events(deviceId: String, limit: Int) async throws -> [LocationEvent] {
        try await database.pool.read { db in
            try String.fetchAll(
                db, sql: "SELECT body FROM location_events WHERE device_id = ? ORDER BY date, seq LIMIT ?",
                arguments: [deviceId, limit]
            ).map(LocationCodec.event)
        }
    }

    public func expire(
        recordedAtOrBefore cutoff: Double,
        _ apply: @Sendable ([ZoneOfInterest], Set<String>, [Visit]) -> [ZoneOfInterest]
    ) async throws -> (visits: Int, events: Int) {
        try await database.pool.write { db in
            let devices = try String.fetchAll(
                db, sql: "SELECT DISTINCT device_id FROM visits WHERE recorded_at <= ?", arguments: [cutoff])
            var removed = 0
            for device in devices {
                let visits = try Self.visits(db, deviceId: device)
                let expiring = Set(visits.filter { $0.recordedAt <= cutoff }.map(\.id))
                let remaining = visits.filter { $0.recordedAt > cutoff }
                let zois = try Self.zois(db, deviceId: device)
                try Self.replaceZOIs(db, deviceId: device, apply(zois, expiring, remaining))
                try db.execute(
                    sql: "DELETE FROM visits WHERE device_id = ? AND recorded_at <= ?", arguments: [device, cutoff])
                removed += db.changesCount
            }
            try db.execute(sql: "DELETE FROM location_events WHERE date <= ?", arguments: [cutoff])
            return (removed, db.changesCount)
        }
    }

    public func deleteLocationData(deviceId: String) async throws -> Int {
        try await database.pool.write { db in
            var removed = 0
            for table in ["visits", "zois", "region_state", "location_events"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE device_id = ?", arguments: [deviceId])
                removed += db.changesCount
            }
            return removed
        }
    }
}

extension SQLiteLocationStore: AudienceHistory {
    public func zoneCentres(inCells ranges: [ClosedRange<Int64>]) async throws -> [ZoneCentre] {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT device_id, period, latitude, longitude FROM zois WHERE cell BETWEEN ? AND ?")
            var found: [ZoneCentre] = []
            for range in ranges {
                let rows = try Row.fetchCursor(statement, arguments: [range.lowerBound, range.upperBound])
                while let row = try rows.next() {
                    found.append(
                        ZoneCentre(
                            deviceId: row[0], period: row[1],
                            coordinate: Coordinate(latitude: row[2], longitude: row[3])
                        ))
                }
            }
            return found
        }
    }

    public func visitPlaces(inCells ranges: [ClosedRange<Int64>], from: Double, to: Double) async throws
        -> [VisitPlace]
    {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT device_id, latitude, longitude, arrival, departure FROM visits
                    WHERE cell BETWEEN ? AND ? AND departure >= ? AND arrival <= ?
                    """)
            var found: [VisitPlace] = []
            for range in ranges {
                let rows = try Row.fetchCursor(
                    statement, arguments: [range.lowerBound, range.upperBound, from, to])
                while let row = try rows.next() {
                    found.append(
                        VisitPlace(
                            deviceId: row[0], coordinate: Coordinate(latitude: row[1], longitude: row[2]),
                            arrival: row[3], departure: row[4]))
                }
            }
            return found
        }
    }
}
