public import APNsCore
public import Delivery
import PostgresNIO

/// Live Activity tokens in PostgreSQL, keyed by (device id, kind, activity id or type).
public struct PostgresActivityStore: ActivityStore {
    let database: PostgresBackend

    public init(database: PostgresBackend) { self.database = database }

    static let columns =
        "device_id, kind, key, activity_type, token, topic, environment, frequent_pushes, registered_at, last_timestamp, ended_at, invalidated_at, invalid_reason"

    static func registrations(_ rows: some AsyncSequence<PostgresRow, any Error>) async throws -> [ActivityRegistration]
    {
        var found: [ActivityRegistration] = []
        for try await row in rows {
            let (device, kindText, key, type, token, topic, environment) = try row.decode(
                (String, String, String, String, String, String, String).self)
            let columns = row.makeRandomAccess()
            guard let kind = ActivityTokenKind(rawValue: kindText) else { continue }
            found.append(
                ActivityRegistration(
                    deviceId: device, kind: kind, activityType: type, activityId: kind == .update ? key : nil,
                    token: token, topic: topic, environment: APNsEnvironmentName(rawValue: environment) ?? .production,
                    frequentPushesEnabled: try columns[7].decode(Bool?.self),
                    registeredAt: try columns[8].decode(Double.self),
                    lastTimestamp: try columns[9].decode(Int64?.self), endedAt: try columns[10].decode(Double?.self),
                    invalidatedAt: try columns[11].decode(Double?.self),
                    invalidReason: try columns[12].decode(String?.self)))
        }
        return found
    }

    public func register(_ registration: ActivityRegistration) async throws -> Bool {
        // xmax = 0 only for a row this statement inserted.
        let rows = try await database.query(
            """
            INSERT INTO activity_tokens (device_id, kind, key, activity_type, token, topic, environment,
                frequent_pushes, registered_at)
            VALUES (\(registration.deviceId), \(registration.kind.rawValue), \(registration.key),
                    \(registration.activityType), \(registration.token), \(registration.topic),
                    \(registration.environment.rawValue), \(registration.frequentPushesEnabled),
                    \(registration.registeredAt))
            ON CONFLICT (device_id, kind, key) DO UPDATE SET
                activity_type = excluded.activity_type, token = excluded.token, topic = excluded.topic,
                environment = excluded.environment, frequent_pushes = excluded.frequent_pushes,
                registered_at = excluded.registered_at, invalidated_at = NULL, invalid_reason = NULL,
                last_timestamp = CASE WHEN activity_tokens.kind = 'push_to_start'
                    AND activity_tokens.token <> excluded.token THEN NULL
                    ELSE activity_tokens.last_timestamp END
            RETURNING (xmax = 0)
            """)
        return try await rows.decode(Bool.self).first { _ in true } ?? false
    }

    public func registrations(deviceId: String) async throws -> [ActivityRegistration] {
        try await Self.registrations(
            database.query(
                """
                SELECT \(unescaped: Self.columns) FROM activity_tokens WHERE device_id = \(deviceId)
                ORDER BY kind COLLATE "C", key COLLATE "C"
                """))
    }

    public func registration(deviceId: String, kind: ActivityTokenKind, key: String) async throws
        -> ActivityRegistration?
    {
        try await Self.registrations(
            database.query(
                """
                SELECT \(unescaped: Self.columns) FROM activity_tokens
                WHERE device_id = \(deviceId) AND kind = \(kind.rawValue) AND key = \(key)
                """)
        ).first
    }

    public func recordSend(
        deviceId: String, kind: ActivityTokenKind, key: String, timestamp: Int64, ends: Bool, now: Double
    ) async throws -> ActivitySendDecision {
        // One statement decides and records (the row lock orders two nodes' sends); a refusal reads why.
        let endedAt: Double? = ends ? now : nil
        let updated = try await database.query(
            """
            UPDATE activity_tokens SET last_timestamp = \(timestamp), ended_at = \(endedAt)
            WHERE device_id = \(deviceId) AND kind = \(kind.rawValue) AND key = \(key) AND ended_at IS NULL
              AND (last_timestamp IS NULL OR last_timestamp < \(timestamp))
            RETURNING 1
            """)
        if try await updated.decode(Int.self).first(where: { _ in true }) != nil { return .recorded }
        guard
            let current = try await registration(deviceId: deviceId, kind: kind, key: key)
        else { return .unknown }
        if let endedAt = current.endedAt { return .ended(at: endedAt) }
        return .notNewer(last: current.lastTimestamp ?? timestamp)
    }

    public func invalidate(
        deviceId: String, token: String, reason: String, at: Double, unlessRegisteredAfter: Double?
    ) async throws -> Int {
        let rows = try await database.query(
            """
            WITH marked AS (
                UPDATE activity_tokens SET invalidated_at = \(at), invalid_reason = \(reason)
                WHERE device_id = \(deviceId) AND token = \(token) AND invalidated_at IS NULL
                  AND (\(unlessRegisteredAfter)::float8 IS NULL OR registered_at <= \(unlessRegisteredAfter)::float8)
                RETURNING 1)
            SELECT count(*) FROM marked
            """)
        return try await rows.decode(Int.self).first { _ in true } ?? 0
    }

    public func removeDevice(_ deviceId: String) async throws -> Int {
        let rows = try await database.query(
            """
            WITH gone AS (DELETE FROM activity_tokens WHERE device_id = \(deviceId) RETURNING 1)
            SELECT count(*) FROM gone
            """)
        return try await rows.decode(Int.self).first { _ in true } ?? 0
    }

    public func revertSend(
        deviceId: String, kind: ActivityTokenKind, key: String, timestamp: Int64, previous: Int64?
    ) async throws -> Bool {
        let rows = try await database.query(
            """
            UPDATE activity_tokens SET last_timestamp = \(previous), ended_at = NULL
            WHERE device_id = \(deviceId) AND kind = \(kind.rawValue) AND key = \(key) AND last_timestamp = \(timestamp)
            RETURNING 1
            """)
        return try await rows.decode(Int.self).first { _ in true } != nil
    }

    public func remove(deviceId: String, kind: ActivityTokenKind, key: String) async throws -> Bool {
        let rows = try await database.query(
            """
            DELETE FROM activity_tokens WHERE device_id = \(deviceId) AND kind = \(kind.rawValue) AND key = \(key)
            RETURNING 1
            """)
        return try await rows.decode(Int.self).first { _ in true } != nil
    }
}

/// Broadcast channels in PostgreSQL.
public struct PostgresChannelStore: ChannelStore {
    let database: PostgresBackend

    public init(database: PostgresBackend) { self.database = database }

    static func channels(_ rows: some AsyncSequence<PostgresRow, any Error>) async throws -> [BroadcastChannel] {
        var found: [BroadcastChannel] = []
        for try await (id, bundle, environment, policy, created) in rows.decode(
            (String, String, String, Int, Double).self)
        {
            found.append(
                BroadcastChannel(
                    channelID: id, bundleID: bundle,
                    environment: APNsEnvironmentName(rawValue: environment) ?? .production, storagePolicy: policy,
                    createdAt: created))
        }
        return found
    }

    public func add(_ channel: BroadcastChannel) async throws {
        try await database.query(
            """
            INSERT INTO broadcast_channels (channel_id, bundle_id, environment, storage_policy, created_at)
            VALUES (\(channel.channelID), \(channel.bundleID), \(channel.environment.rawValue),
                    \(channel.storagePolicy), \(channel.createdAt))
            ON CONFLICT (channel_id) DO NOTHING
            """)
    }

    public func channels(bundleID: String?, environment: APNsEnvironmentName?) async throws -> [BroadcastChannel] {
        try await Self.channels(
            database.query(
                """
                SELECT channel_id, bundle_id, environment, storage_policy, created_at FROM broadcast_channels
                WHERE (\(bundleID)::text IS NULL OR bundle_id = \(bundleID)::text)
                  AND (\(environment?.rawValue)::text IS NULL OR environment = \(environment?.rawValue)::text)
                ORDER BY created_at, channel_id COLLATE "C"
                """))
    }

    public func channel(id: String) async throws -> BroadcastChannel? {
        try await Self.channels(
            database.query(
                """
                SELECT channel_id, bundle_id, environment, storage_policy, created_at FROM broadcast_channels
                WHERE channel_id = \(id)
                """)
        ).first
    }

    public func remove(id: String) async throws -> Bool {
        let rows = try await database.query(
            "DELETE FROM broadcast_channels WHERE channel_id = \(id) RETURNING 1")
        return try await rows.decode(Int.self).first { _ in true } != nil
    }
}
