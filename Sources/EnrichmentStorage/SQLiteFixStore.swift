public import EnrichmentCore
import Essentials
import Foundation
import GRDB

/// Location fixes in SQLite; the last fix is found through the (device_id, fix_time) primary key.
public struct SQLiteFixStore: FixStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    public func insert(_ fixes: [LocationFix]) async throws {
        guard !fixes.isEmpty else { return }
        try await database.pool.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO fixes (device_id, fix_time, latitude, longitude, horizontal_accuracy, context, received_at,
                                       extras)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (device_id, fix_time) DO UPDATE SET
                        latitude = excluded.latitude, longitude = excluded.longitude,
                        horizontal_accuracy = excluded.horizontal_accuracy, context = excluded.context,
                        received_at = excluded.received_at, extras = excluded.extras
                    """)
            for fix in fixes {
                try statement.execute(arguments: [
                    fix.deviceId, fix.fixTime, fix.coordinate.latitude, fix.coordinate.longitude,
                    fix.horizontalAccuracy, fix.context, fix.receivedAt, Self.encode(fix.extras),
                ])
            }
        }
    }

    public func latestFix(deviceId: String) async throws -> LocationFix? {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
                    FROM fixes WHERE device_id = ? ORDER BY fix_time DESC LIMIT 1
                    """)
            guard let row = try Row.fetchOne(statement, arguments: [deviceId]) else { return nil }
            return Self.fix(row, deviceId: deviceId)
        }
    }

    public func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix] {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
                    FROM fixes WHERE device_id = ? ORDER BY fix_time DESC LIMIT 1
                    """)
            var found: [String: LocationFix] = [:]
            for id in Set(deviceIds) {
                guard let row = try Row.fetchOne(statement, arguments: [id]) else { continue }
                found[id] = Self.fix(row, deviceId: id)
            }
            return found
        }
    }

    public func fixes(deviceId: String, after: Double, limit: Int) async throws -> [LocationFix] {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
                    FROM fixes WHERE device_id = ? AND fix_time > ? ORDER BY fix_time LIMIT ?
                    """)
            return try Row.fetchAll(statement, arguments: [deviceId, after, limit]).map {
                Self.fix($0, deviceId: deviceId)
            }
        }
    }

    /// A fix from a row of (fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras).
    static func fix(_ row: Row, deviceId: String) -> LocationFix {
        let extras: String? = row[6]
        return LocationFix(
            deviceId: deviceId, coordinate: Coordinate(latitude: row[1], longitude: row[2]), fixTime: row[0],
            horizontalAccuracy: row[3], context: row[4], receivedAt: row[5],
            extras: extras.flatMap { try? JSONValue.decode(Data($0.utf8)) })
    }

    static func encode(_ extras: JSONValue?) -> String? {
        extras.map { String(decoding: JSONWriter.bytes($0), as: UTF8.self) }
    }

    public func expireFixes(takenAtOrBefore cutoff: Double) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(sql: "DELETE FROM fixes WHERE fix_time <= ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    public func deleteDevice(_ deviceId: String) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(sql: "DELETE FROM fixes WHERE device_id = ?", arguments: [deviceId])
            return db.changesCount
        }
    }
}
