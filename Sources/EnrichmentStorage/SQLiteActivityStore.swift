public import APNsCore
public import Delivery
import GRDB

/// Live Activity tokens in SQLite, keyed by (device id, kind, activity id or type).
public struct SQLiteActivityStore: ActivityStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    static let columns = """
        device_id, kind, key, activity_type, token, topic, environment, frequent_pushes, registered_at,
        last_timestamp, ended_at, invalidated_at, invalid_reason
        """

    static func registration(_ row: Row) -> ActivityRegistration? {
        guard let kind = ActivityTokenKind(rawValue: row["kind"]) else { return nil }
        let key: String = row["key"]
        return ActivityRegistration(
            deviceId: row["device_id"], kind: kind, activityType: row["activity_type"],
            activityId: kind == .update ? key : nil, token: row["token"], topic: row["topic"],
            environment: APNsEnvironmentName(rawValue: row["environment"]) ?? .production,
            frequentPushesEnabled: row["frequent_pushes"], registeredAt: row["registered_at"],
            lastTimestamp: row["last_timestamp"], endedAt: row["ended_at"], invalidatedAt: row["invalidated_at"],
            invalidReason: row["invalid_reason"])
    }

    public func register(_ registration: ActivityRegistration) async throws -> Bool {
        try await database.pool.write { db in
            let existed =
                try Bool.fetchOne(
                    db, sql: "SELECT 1 FROM activity_tokens WHERE device_id = ? AND kind = ? AND key = ?",
                    arguments: [registration.deviceId, registration.kind.rawValue, registration.key]) ?? false
            try db.execute(
                sql: """
                    INSERT INTO activity_tokens (device_id, kind, key, activity_type, token, topic, environment,
                        frequent_pushes, registered_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (device_id, kind, key) DO UPDATE SET
                        activity_type = excluded.activity_type, token = excluded.token, topic = excluded.topic,
                        environment = excluded.environment, frequent_pushes = excluded.frequent_pushes,
                        registered_at = excluded.registered_at, invalidated_at = NULL, invalid_reason = NULL,
                        last_timestamp = CASE WHEN activity_tokens.kind = 'push_to_start'
                            AND activity_tokens.token <> excluded.token THEN NULL
                            ELSE activity_tokens.last_timestamp END
                    """,
                arguments: [
                    registration.deviceId, registration.kind.rawValue, registration.key, registration.activityType,
                    registration.token, registration.topic, registration.environment.rawValue,
                    registration.frequentPushesEnabled, registration.registeredAt,
                ])
            return !existed
        }
    }

    public func registrations(deviceId: String) async throws -> [ActivityRegistration] {
        try await database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(Self.columns) FROM activity_tokens WHERE device_id = ? ORDER BY kind, key",
                arguments: [deviceId]
            ).compactMap(Self.registration)
        }
    }

    public func registration(deviceId: String, kind: ActivityTokenKind, key: String) async throws
        -> ActivityRegistration?
    {
        try await database.pool.read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT \(Self.columns) FROM activity_tokens WHERE device_id = ? AND kind = ? AND key = ?",
                arguments: [deviceId, kind.rawValue, key]
            ).flatMap(Self.registration)
        }
    }

    public func recordSend(
        deviceId: String, kind: ActivityTokenKind, key: String, timestamp: Int64, ends: Bool, now: Double
    ) async throws -> ActivitySendDecision {
        try await database.pool.write { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT last_timestamp, ended_at FROM activity_tokens
                        WHERE device_id = ? AND kind = ? AND key = ?
                        """, arguments: [deviceId, kind.rawValue, key])
            else { return .unknown }
            if let endedAt: Double = row["ended_at"] { return .ended(at: endedAt) }
            if let last: Int64 = row["last_timestamp"], timestamp <= last { return .notNewer(last: last) }
            try db.execute(
                sql: """
                    UPDATE activity_tokens SET last_timestamp = ?, ended_at = ?
                    WHERE device_id = ? AND kind = ? AND key = ?
                    """,
                arguments: [timestamp, ends ? now : nil, deviceId, kind.rawValue, key])
            return .recorded
        }
    }

    public func invalidate(
        deviceId: String, token: String, reason: String, at: Double, unlessRegisteredAfter: Double?
    ) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(
                sql: """
                    UPDATE activity_tokens SET invalidated_at = ?, invalid_reason = ?
                    WHERE device_id = ? AND token = ? AND invalidated_at IS NULL
                      AND (? IS NULL OR registered_at <= ?)
                    """,
                arguments: [at, reason, deviceId, token, unlessRegisteredAfter, unlessRegisteredAfter])
            return db.changesCount
        }
    }

    public func removeDevice(_ deviceId: String) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(sql: "DELETE FROM activity_tokens WHERE device_id = ?", arguments: [deviceId])
            return db.changesCount
        }
    }

    public func revertSend(
        deviceId: String, kind: ActivityTokenKind, key: String, timestamp: Int64, previous: Int64?
    ) async throws -> Bool {
        try await database.pool.write { db in
            try db.execute(
                sql: """
                    UPDATE activity_tokens SET last_timestamp = ?, ended_at = NULL
                    WHERE device_id = ? AND kind = ? AND key = ? AND last_timestamp = ?
                    """,
                arguments: [previous, deviceId, kind.rawValue, key, timestamp])
            return db.changesCount > 0
        }
    }

    public func remove(deviceId: String, kind: ActivityTokenKind, key: String) async throws -> Bool {
        try await database.pool.write { db in
            try db.execute(
                sql: "DELETE FROM activity_tokens WHERE device_id = ? AND kind = ? AND key = ?",
                arguments: [deviceId, kind.rawValue, key])
            return db.changesCount > 0
        }
    }
}

/// Broadcast channels in SQLite.
public struct SQLiteChannelStore: ChannelStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    static func channel(_ row: Row) -> BroadcastChannel {
        BroadcastChannel(
            channelID: row["channel_id"], bundleID: row["bundle_id"],
            environment: APNsEnvironmentName(rawValue: row["environment"]) ?? .production,
            storagePolicy: row["storage_policy"], createdAt: row["created_at"])
    }

    public func add(_ channel: BroadcastChannel) async throws {
        try await database.pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO broadcast_channels (channel_id, bundle_id, environment, storage_policy, created_at)
                    VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel_id) DO NOTHING
                    """,
                arguments: [
                    channel.channelID, channel.bundleID, channel.environment.rawValue, channel.storagePolicy,
                    channel.createdAt,
                ])
        }
    }

    public func channels(bundleID: String?, environment: APNsEnvironmentName?) async throws -> [BroadcastChannel] {
        try await database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT channel_id, bundle_id, environment, storage_policy, created_at FROM broadcast_channels
                    WHERE (? IS NULL OR bundle_id = ?) AND (? IS NULL OR environment = ?)
                    ORDER BY created_at, channel_id
                    """,
                arguments: [bundleID, bundleID, environment?.rawValue, environment?.rawValue]
            ).map(Self.channel)
        }
    }

    public func channel(id: String) async throws -> BroadcastChannel? {
        try await database.pool.read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT channel_id, bundle_id, environment, storage_policy, created_at FROM broadcast_channels
                    WHERE channel_id = ?
                    """, arguments: [id]
            ).map(Self.channel)
        }
    }

    public func remove(id: String) async throws -> Bool {
        try await database.pool.write { db in
            try db.execute(sql: "DELETE FROM broadcast_channels WHERE channel_id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }
}
