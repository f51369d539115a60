public import EnrichmentCore
import Essentials
import Foundation
import GRDB
import GRDBSQLite

/// Location fixes in SQLite; the last fix is found through the (device_id, fix_time) primary key.
public struct SQLiteFixStore: FixStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    public func insert(_ fixes: [LocationFix]) async throws {
        _ = try await insertReportingLatest(fixes)
    }

    public func insertReportingLatest(_ fixes: [LocationFix]) async throws -> [String: LocationFix] {
        guard !fixes.isEmpty else { return [:] }
        return try await database.pool.write { db in try Self.write(db, fixes) }
    }

    /// One indexed read per device inside the insert's own transaction (no extra trip to the database).
    public func insertReportingPrior(_ fixes: [LocationFix]) async throws -> PriorFixes? {
        guard !fixes.isEmpty else { return PriorFixes() }
        let firsts = fixes.earliestTimeByDevice()
        return try await database.pool.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
                    FROM fixes WHERE device_id = ? AND fix_time < ? ORDER BY fix_time DESC LIMIT 1
                    """)
            var prior: [String: LocationFix?] = [:]
            for (device, time) in firsts {
                prior[device] = .some(
                    try FixCursor(statement, arguments: [device, time], deviceId: device).next())
            }
            let latest = try Self.write(db, fixes)
            return PriorFixes(prior, latest: latest)
        }
    }

    /// Where each device of the given cells was at its last fix, fresh and fine enough (audiences), read from the covering
    /// `last_fixes_by_cell` index alone. The rows are read through SQLite's C interface: a 10 km audience in a
    /// city reads over 100,000 of them, and GRDB's `Row` spent more than the read itself on each.
    public func lastPositions(
        inCells ranges: [ClosedRange<Int64>], fixedSince oldest: Double, accuracyAtMost maxAccuracy: Double
    ) async throws -> [DevicePosition] {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT device_id, latitude, longitude FROM last_fixes
                    WHERE cell BETWEEN ? AND ? AND fix_time >= ? AND ifnull(horizontal_accuracy, 0) <= ?
                    """)
            let handle = statement.sqliteStatement
            var found: [DevicePosition] = []
            for range in ranges {
                try statement.setArguments([range.lowerBound, range.upperBound, oldest, maxAccuracy])
                defer { sqlite3_reset(handle) }
                while true {
                    let code = sqlite3_step(handle)
                    if code == SQLITE_DONE { break }
                    guard code == SQLITE_ROW, let text = sqlite3_column_text(handle, 0) else {
                        throw DatabaseError(
                            resultCode: ResultCode(rawValue: code),
                            message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
                    }
                    let id = String(
                        decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, 0))),
                        as: UTF8.self)
                    found.append(
                        DevicePosition(
                            deviceId: id,
                            coordinate: Coordinate(
                                latitude: sqlite3_column_double(handle, 1), longitude: sqlite3_column_double(handle, 2))
                        ))
                }
            }
            return found
        }
    }

    /// Keeps `last_fixes` on each device's newest fix of the batch (a late fix leaves a newer one in place).
    /// Returns the devices whose `last_fixes` row is now the batch's fix (a new device, a newer fix, or the same time
    /// with another position): their newest stored fix is that one, every column as given.
    @discardableResult
    static func writeLastFixes(_ db: Database, _ fixes: [LocationFix]) throws -> [String: LocationFix] {
        let newest = fixes.newestByDevice()
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO last_fixes (device_id, fix_time, latitude, longitude, horizontal_accuracy, cell)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (device_id) DO UPDATE SET
                    fix_time = excluded.fix_time, latitude = excluded.latitude, longitude = excluded.longitude,
                    horizontal_accuracy = excluded.horizontal_accuracy, cell = excluded.cell
                WHERE excluded.fix_time >= last_fixes.fix_time
                    AND (fix_time IS NOT excluded.fix_time OR latitude IS NOT excluded.latitude
                         OR longitude IS NOT excluded.longitude
                         OR horizontal_accuracy IS NOT excluded.horizontal_accuracy)
                """)
        // Bound through SQLite's C interface (`RawStatement`): GRDB's arguments (an array of existentials per row)
        // cost more than SQLite's own insert here, a batch being up to hundreds of fixes.
        let insert = RawStatement(statement, in: db)
        var latest: [String: LocationFix] = Dictionary(minimumCapacity: newest.count)
        for fix in newest.values {
            try insert.bind(1, fix.deviceId)
            try insert.bind(2, fix.fixTime)
            try insert.bind(3, fix.coordinate.latitude)
            try insert.bind(4, fix.coordinate.longitude)
            try insert.bind(5, fix.horizontalAccuracy)
            try insert.bind(
                6, LastFixCells.cell(latitude: fix.coordinate.latitude, longitude: fix.coordinate.longitude))
            // Written: the position differs from the stored one's, so `fixes` gets this fix's row as given too.
            if try insert.run() > 0 { latest[fix.deviceId] = fix }
        }
        return latest
    }

    /// Stores the fixes; returns the devices whose newest stored fix is now one of them (`writeLastFixes`).
    @discardableResult
    static func write(_ db: Database, _ fixes: [LocationFix]) throws -> [String: LocationFix] {
        let latest = try writeLastFixes(db, fixes)
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO fixes (device_id, fix_time, latitude, longitude, horizontal_accuracy, context, received_at,
                                   extras)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (device_id, fix_time) DO UPDATE SET
                    latitude = excluded.latitude, longitude = excluded.longitude,
                    horizontal_accuracy = excluded.horizontal_accuracy, context = excluded.context,
                    received_at = excluded.received_at, extras = excluded.extras
                -- The same fix sent again (an upload retried) is not written again: it keeps its first arrival.
                WHERE latitude IS NOT excluded.latitude OR longitude IS NOT excluded.longitude
                    OR horizontal_accuracy IS NOT excluded.horizontal_accuracy OR context IS NOT excluded.context
                    OR extras IS NOT excluded.extras
                """)
        let insert = RawStatement(statement, in: db)
        for fix in fixes {
            try insert.bind(1, fix.deviceId)
            try insert.bind(2, fix.fixTime)
            try insert.bind(3, fix.coordinate.latitude)
            try insert.bind(4, fix.coordinate.longitude)
            try insert.bind(5, fix.horizontalAccuracy)
            try insert.bind(6, fix.context)
            try insert.bind(7, fix.receivedAt)
            try insert.bind(8, Self.encode(fix.extras))
            try insert.run()
        }
        return latest
    }

    public func latestFix(deviceId: String) async throws -> LocationFix? {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
                    FROM fixes WHERE device_id = ? ORDER BY fix_time DESC LIMIT 1
                    """)
            return try FixCursor(statement, arguments: [deviceId], deviceId: deviceId).next()
        }
    }

    public func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix] {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
                    FROM fixes WHERE device_id = ? ORDER BY fix_time DESC LIMIT 1
                    """)
            var found: [String: LocationFix] = Dictionary(minimumCapacity: deviceIds.count)
            for id in Set(deviceIds) {
                if let fix = try FixCursor(statement, arguments: [id], deviceId: id).next() { found[id] = fix }
            }
            return found
        }
    }

    public func fix(deviceId: String, before: Double) async throws -> LocationFix? {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
                    FROM fixes WHERE device_id = ? AND fix_time < ? ORDER BY fix_time DESC LIMIT 1
                    """)
            return try FixCursor(statement, arguments: [deviceId, before], deviceId: deviceId).next()
        }
    }

    public func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
                    FROM fixes WHERE device_id = ? AND fix_time > ? AND fix_time < ? ORDER BY fix_time LIMIT ?
                    """)
            return try Array(FixCursor(statement, arguments: [deviceId, after, before, limit], deviceId: deviceId))
        }
    }

    static func encode(_ extras: JSONValue?) -> String? {
        extras.map { String(decoding: JSONWriter.bytes($0), as: UTF8.self) }
    }

    public func expireFixes(takenAtOrBefore cutoff: Double) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(sql: "DELETE FROM last_fixes WHERE fix_time <= ?", arguments: [cutoff])
            try db.execute(sql: "DELETE FROM fixes WHERE fix_time <= ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    public func deleteDevice(_ deviceId: String) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(sql: "DELETE FROM last_fixes WHERE device_id = ?", arguments: [deviceId])
            try db.execute(sql: "DELETE FROM fixes WHERE device_id = ?", arguments: [deviceId])
            return db.changesCount
        }
    }
}

/// Reads fixes straight from SQLite's columns (fix_time, latitude, longitude, horizontal_accuracy, context,
/// received_at, extras): GRDB's generic row decoding costs more than the query on the ingest and enrich paths.
final class FixCursor: DatabaseCursor {
    typealias Element = LocationFix
    var _isDone = false
    let _statement: Statement
    let deviceId: String

    init(_ statement: Statement, arguments: StatementArguments, deviceId: String) throws {
        _statement = statement
        self.deviceId = deviceId
        try statement.setArguments(arguments)
    }

    // A statement left mid-way keeps its read transaction open: reset it however the cursor ends, as GRDB's own
    // cursors do.
    deinit { sqlite3_reset(_statement.sqliteStatement) }

    func _element(sqliteStatement s: SQLiteStatement) throws -> LocationFix {
        func text(_ column: CInt) -> String? {
            guard sqlite3_column_type(s, column) != SQLITE_NULL, let bytes = sqlite3_column_text(s, column) else {
                return nil
            }
            return String(cString: bytes)
        }
        let accuracy = sqlite3_column_type(s, 3) == SQLITE_NULL ? nil : sqlite3_column_double(s, 3)
        return LocationFix(
            deviceId: deviceId,
            coordinate: Coordinate(latitude: sqlite3_column_double(s, 1), longitude: sqlite3_column_double(s, 2)),
            fixTime: sqlite3_column_double(s, 0), horizontalAccuracy: accuracy, context: text(4),
            receivedAt: sqlite3_column_double(s, 5),
            extras: text(6).flatMap { try? JSONValue.decode(Data($0.utf8)) })
    }
}
