import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import PostgresNIO

/// Device token registrations in PostgreSQL, keyed by (device id, token).
public struct PostgresTokenStore: DeviceTokenStore {
    let database: PostgresBackend

    public init(database: PostgresBackend) { self.database = database }

    static let columns =
        "device_id, token, topic, environment, registered_at, active, invalidated_at, reason"
    static let qualifiedColumns =
        "t.device_id, t.token, t.topic, t.environment, t.registered_at, t.active, t.invalidated_at, t.reason"

    static func registrations(_ rows: some AsyncSequence<PostgresRow, any Error>) async throws -> [TokenRegistration] {
        var found: [TokenRegistration] = []
        for try await (device, token, topic, environment, registered, active, invalidated, reason) in rows.decode(
            (String, String, String, String, Double, Bool, Double?, String?).self)
        {
            found.append(
                TokenRegistration(
                    deviceId: device, token: token, topic: topic,
                    environment: APNsEnvironmentName(rawValue: environment) ?? .production, registeredAt: registered,
                    active: active, invalidatedAt: invalidated, reason: reason))
        }
        return found
    }

    public func register(_ registration: TokenRegistration) async throws -> Bool {
        // xmax = 0 only for a row this statement inserted (an update sets it): created, or refreshed.
        let rows = try await database.query(
            """
            INSERT INTO apns_tokens (device_id, token, topic, environment, registered_at, active)
            VALUES (\(registration.deviceId), \(registration.token), \(registration.topic),
                    \(registration.environment.rawValue), \(registration.registeredAt), true)
            ON CONFLICT (device_id, token) DO UPDATE SET
                topic = excluded.topic, environment = excluded.environment, registered_at = excluded.registered_at,
                active = true, invalidated_at = NULL, reason = NULL
            RETURNING (xmax = 0)
            """)
        return try await rows.decode(Bool.self).first { _ in true } ?? false
    }

    public func registerAll(_ registrations: [TokenRegistration]) async throws -> Int {
        guard !registrations.isEmpty else { return 0 }
        // The last entry of a pair listed twice, in key order (two imports sharing rows cannot deadlock).
        var last: [String: TokenRegistration] = [:]
        for registration in registrations { last[registration.deviceId + "\u{0}" + registration.token] = registration }
        let rows = last.keys.sorted().compactMap { last[$0] }
        let created = try await database.query(
            """
            WITH made AS (
                INSERT INTO apns_tokens (device_id, token, topic, environment, registered_at, active)
                SELECT d, t, tp, e, r, true
                FROM unnest(\(rows.map(\.deviceId))::text[], \(rows.map(\.token))::text[], \(rows.map(\.topic))::text[],
                            \(rows.map(\.environment.rawValue))::text[], \(rows.map(\.registeredAt))::float8[])
                     AS u(d, t, tp, e, r)
                ON CONFLICT (device_id, token) DO UPDATE SET
                    topic = excluded.topic, environment = excluded.environment, registered_at = excluded.registered_at,
                    active = true, invalidated_at = NULL, reason = NULL
                RETURNING (xmax = 0) AS created)
            SELECT count(*) FILTER (WHERE created)::int8 FROM made
            """)
        return try await created.decode(Int.self).first { _ in true } ?? 0
    }

    public func registrations(deviceId: String) async throws -> [TokenRegistration] {
        try await Self.registrations(
            database.query(
                """
                SELECT \(unescaped: Self.columns) FROM apns_tokens WHERE device_id = \(deviceId)
                ORDER BY registered_at, token
                """))
    }

    public func activeRegistrations(deviceIds: [String]) async throws -> [String: [TokenRegistration]] {
        let ids = Array(Set(deviceIds))
        guard !ids.isEmpty else { return [:] }
        // Joined to the list, one primary-key look per device: as `device_id = ANY(...)` the planner read the
        // whole table and filtered it (31 ms against 4.7 ms for 1,000 devices in 100,000; BENCHMARKS.md).
        let found = try await Self.registrations(
            database.query(
                """
                SELECT \(unescaped: Self.qualifiedColumns)
                FROM unnest(\(ids)::text[]) AS u(id) JOIN apns_tokens t ON t.device_id = u.id
                WHERE t.active
                ORDER BY t.device_id, t.registered_at, t.token
                """))
        return Dictionary(grouping: found, by: \.deviceId)
    }

    public func remove(deviceId: String, token: String) async throws -> Bool {
        let rows = try await database.query(
            "DELETE FROM apns_tokens WHERE device_id = \(deviceId) AND token = \(token) RETURNING 1")
        return try await rows.decode(Int.self).first { _ in true } != nil
    }

    public func removeDevice(_ deviceId: String) async throws -> Int {
        try await database.withTransaction { connection in
            let rows = try await connection.run(
                """
                WITH gone AS (DELETE FROM apns_tokens WHERE device_id = \(deviceId) RETURNING 1)
                SELECT count(*) FROM gone
                """, logger: database.logger)
            let removed = try await rows.decode(Int.self).first { _ in true } ?? 0
            try await connection.run(
                "DELETE FROM device_profiles WHERE device_id = \(deviceId)", logger: database.logger)
            try await connection.run("DELETE FROM device_tags WHERE device_id = \(deviceId)", logger: database.logger)
            return removed
        }
    }

    public func setProfiles(_ changes: [ProfileChange], at: Double) async throws {
        // The last entry of a device listed twice, as SQLite's loop leaves it.
        var zones: [String: String?] = [:]
        var tags: [String: [String]] = [:]
        for change in changes {
            if let zone = change.timeZone { zones[change.deviceId] = zone }
            if let set = change.tags { tags[change.deviceId] = set }
        }
        guard !zones.isEmpty || !tags.isEmpty else { return }
        // Rows locked in device order, so that two imports sharing devices cannot deadlock.
        let zoneIds = zones.keys.sorted()
        let zoneNames = zoneIds.map { (zones[$0] ?? nil) ?? "" }  // "" is a cleared zone (no IANA name is empty)
        let tagged = tags.keys.sorted()
        let pairs = tagged.flatMap { id in Set(tags[id] ?? []).sorted().map { (id, $0) } }
        let pairIds = pairs.map(\.0)
        let pairTags = pairs.map(\.1)
        try await database.withTransaction { connection in
            if !zoneIds.isEmpty {
                try await connection.run(
                    """
                    INSERT INTO device_profiles (device_id, time_zone, updated_at)
                    SELECT d, NULLIF(z, ''), \(at) FROM unnest(\(zoneIds)::text[], \(zoneNames)::text[]) AS u(d, z)
                    ON CONFLICT (device_id) DO UPDATE SET time_zone = excluded.time_zone, updated_at = excluded.updated_at
                    """, logger: database.logger)
            }
            if !tagged.isEmpty {
                try await connection.run(
                    "DELETE FROM device_tags WHERE device_id = ANY(\(tagged)::text[])", logger: database.logger)
                try await connection.run(
                    """
                    INSERT INTO device_tags (tag, device_id) SELECT t, d FROM unnest(\(pairTags)::text[], \(pairIds)::text[]) AS u(t, d)
                    ON CONFLICT DO NOTHING
                    """, logger: database.logger)
            }
        }
    }

    public func profiles(deviceIds: [String]) async throws -> [String: DeviceProfile] {
        let ids = Array(Set(deviceIds))
        guard !ids.isEmpty else { return [:] }
        var found: [String: DeviceProfile] = [:]
        for try await (id, zone) in try await database.query(
            """
            SELECT p.device_id, p.time_zone
            FROM unnest(\(ids)::text[]) AS u(id) JOIN device_profiles p ON p.device_id = u.id
            """
        ).decode((String, String?).self) where zone != nil {
            found[id, default: DeviceProfile()].timeZone = zone
        }
        for try await (id, tag) in try await database.query(
            """
            SELECT t.device_id, t.tag FROM unnest(\(ids)::text[]) AS u(id) JOIN device_tags t ON t.device_id = u.id
            ORDER BY t.device_id, t.tag
            """
        ).decode((String, String).self) {
            found[id, default: DeviceProfile()].tags.append(tag)
        }
        return found
    }

    public func devices(taggedWith tag: String) async throws -> [String] {
        try await devices(taggedWithAll: [tag])
    }

    public func devices(taggedWithAll tags: [String]) async throws -> [String] {
        guard !tags.isEmpty else { return [] }
        // The rarest tag's devices that carry every other (each probed through the (tag, device_id) key), as one
        // text of lines (`PackedRows`): one value to decode, not a row per device (a common tag holds most devices).
        var ordered = tags
        if tags.count > 1 {
            var sizes: [String: Int] = [:]
            let rows = try await database.query(
                "SELECT w.tag, (SELECT count(*) FROM device_tags d WHERE d.tag = w.tag) FROM unnest(\(tags)::text[]) AS w(tag)"
            )
            for try await (tag, size) in rows.decode((String, Int).self) { sizes[tag] = size }
            ordered.sort { sizes[$0, default: 0] < sizes[$1, default: 0] }
        }
        let first = ordered[0]
        let others = Array(ordered.dropFirst())
        let rows = try await database.bulkRead(
            """
            SELECT string_agg(t.device_id, E'\\n') FROM device_tags t
            WHERE t.tag = \(first)
              AND NOT EXISTS (SELECT 1 FROM unnest(\(others)::text[]) AS w(tag)
                              WHERE NOT EXISTS (SELECT 1 FROM device_tags o
                                                WHERE o.tag = w.tag AND o.device_id = t.device_id))
            """)
        return try await PackedRows.lines(rows)
    }

    public func devices(inApp app: String) async throws -> [String] {
        // As one text of lines (`PackedRows`): one value to decode, not a row per device.
        let rows =
            app == AppNamespace.defaultApp
            ? try await database.bulkRead(
                """
                SELECT string_agg(device_id, E'\\n') FROM (
                    SELECT DISTINCT device_id FROM apns_tokens WHERE active AND strpos(device_id, '/') = 0) AS d
                """)
            : try await database.bulkRead(
                """
                SELECT string_agg(device_id, E'\\n') FROM (
                    SELECT DISTINCT device_id FROM apns_tokens
                    WHERE starts_with(device_id, \(app + "/")) AND active) AS d
                """)
        return try await PackedRows.lines(rows)
    }

    public func devices(inApp app: String, after: String?, limit: Int) async throws -> [String] {
        // Through the primary key (device_id, token), in its order (the database's collation, which `after` is
        // compared in too). Without fresh statistics (a table just loaded) the planner sorted the whole table for
        // each page (140 ms at 100,000 rows against 0.6 ms), and at a million it started parallel workers: the
        // index's order is asked for, by one process. No DISTINCT: a device's registrations are next to each
        // other, and are made one here.
        let logger = database.logger
        return try await database.withTransaction { connection in
            try await connection.planThroughKeys(logger: logger)
            let rows =
                app == AppNamespace.defaultApp
                ? try await connection.run(
                    """
                    SELECT device_id FROM apns_tokens
                    WHERE device_id > \(after ?? "") AND active AND strpos(device_id, '/') = 0
                    ORDER BY device_id LIMIT \(limit)
                    """, logger: logger)
                : try await connection.run(
                    """
                    SELECT device_id FROM apns_tokens
                    WHERE device_id > \(after ?? "") AND starts_with(device_id, \(app + "/")) AND active
                    ORDER BY device_id LIMIT \(limit)
                    """, logger: logger)
            var found: [String] = []
            found.reserveCapacity(limit)
            for try await id in rows.decode(String.self) where id != found.last { found.append(id) }
            return found
        }
    }

    public func deactivate(_ deactivation: TokenDeactivation) async throws -> TokenRegistration? {
        let rows = try await database.query(
            """
            UPDATE apns_tokens SET active = false, invalidated_at = \(deactivation.invalidatedAt),
                reason = \(deactivation.reason)
            WHERE device_id = \(deactivation.deviceId) AND token = \(deactivation.token) AND active
              AND (\(deactivation.unlessRegisteredAfter)::float8 IS NULL
                   OR registered_at <= \(deactivation.unlessRegisteredAfter)::float8)
              AND (\(deactivation.onlyFor?.topic)::text IS NULL OR topic = \(deactivation.onlyFor?.topic)::text)
              AND (\(deactivation.onlyFor?.environment.rawValue)::text IS NULL
                   OR environment = \(deactivation.onlyFor?.environment.rawValue)::text)
            RETURNING \(unescaped: Self.columns)
            """)
        return try await Self.registrations(rows).first
    }
}
