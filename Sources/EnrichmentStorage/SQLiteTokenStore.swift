import APNsCore
public import Delivery
import EnrichmentCore
import GRDB

/// Device token registrations in SQLite, keyed by (device id, token).
public struct SQLiteTokenStore: DeviceTokenStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    /// Creates a registration or refreshes it (active again); the statement `register` and `registerAll` share.
    static let upsert = """
        INSERT INTO apns_tokens (device_id, token, topic, environment, registered_at, active)
        VALUES (?, ?, ?, ?, ?, 1)
        ON CONFLICT (device_id, token) DO UPDATE SET
            topic = excluded.topic, environment = excluded.environment,
            registered_at = excluded.registered_at, active = 1, invalidated_at = NULL, reason = NULL
        """

    public func register(_ registration: TokenRegistration) async throws -> Bool {
        try await registerAll([registration]) == 1
    }

    public func registerAll(_ registrations: [TokenRegistration]) async throws -> Int {
        try await database.pool.write { db in
            // Each pair looked up by its key first: created or refreshed, counted without reading the table.
            let exists = RawStatement(
                try db.cachedStatement(sql: "SELECT 1 FROM apns_tokens WHERE device_id = ? AND token = ?"), in: db)
            let upsert = RawStatement(try db.cachedStatement(sql: Self.upsert), in: db)
            var created = 0
            for registration in registrations {
                try exists.bind(1, registration.deviceId)
                try exists.bind(2, registration.token)
                var existed = false
                try exists.forEachRow { _ in existed = true }
                if !existed { created += 1 }
                try upsert.bind(1, registration.deviceId)
                try upsert.bind(2, registration.token)
                try upsert.bind(3, registration.topic)
                try upsert.bind(4, registration.environment.rawValue)
                try upsert.bind(5, registration.registeredAt)
                try upsert.run()
            }
            return created
        }
    }

    public func registrations(deviceId: String) async throws -> [TokenRegistration] {
        try await database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT device_id, token, topic, environment, registered_at, active, invalidated_at, reason
                    FROM apns_tokens WHERE device_id = ? ORDER BY registered_at, token
                    """, arguments: [deviceId]
            ).map(Self.registration)
        }
    }

    public func activeRegistrations(deviceIds: [String]) async throws -> [String: [TokenRegistration]] {
        try await database.pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT device_id, token, topic, environment, registered_at, active, invalidated_at, reason
                    FROM apns_tokens WHERE device_id = ? AND active = 1
                    """)
            // Up to 1,000 devices per push: each looked up through SQLite's C interface (`RawStatement`). The
            // order (oldest registration first) is made here: an ORDER BY costs SQLite a sorter per device, and
            // nearly every device has one token.
            let raw = RawStatement(statement, in: db)
            var found: [String: [TokenRegistration]] = [:]
            for id in Set(deviceIds) {
                try raw.bind(1, id)
                var rows: [TokenRegistration] = []
                try raw.forEachRow { row in
                    rows.append(
                        TokenRegistration(
                            deviceId: id, token: row.string(1) ?? "", topic: row.string(2) ?? "",
                            environment: row.string(3).flatMap(APNsEnvironmentName.init(rawValue:)) ?? .production,
                            registeredAt: row.double(4) ?? 0, active: row.bool(5), invalidatedAt: row.double(6),
                            reason: row.string(7)))
                }
                if rows.count > 1 {
                    rows.sort { ($0.registeredAt, $0.token) < ($1.registeredAt, $1.token) }
                }
                if !rows.isEmpty { found[id] = rows }
            }
            return found
        }
    }

    public func remove(deviceId: String, token: String) async throws -> Bool {
        try await database.pool.write { db in
            try db.execute(
                sql: "DELETE FROM apns_tokens WHERE device_id = ? AND token = ?", arguments: [deviceId, token])
            return db.changesCount > 0
        }
    }

    public func removeDevice(_ deviceId: String) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(sql: "DELETE FROM apns_tokens WHERE device_id = ?", arguments: [deviceId])
            let removed = db.changesCount
            try db.execute(sql: "DELETE FROM device_profiles WHERE device_id = ?", arguments: [deviceId])
            try db.execute(sql: "DELETE FROM device_tags WHERE device_id = ?", arguments: [deviceId])
            return removed
        }
    }

    public func setProfiles(_ changes: [ProfileChange], at: Double) async throws {
        guard !changes.isEmpty else { return }
        try await database.pool.write { db in
            let zone = try db.cachedStatement(
                sql: """
                    INSERT INTO device_profiles (device_id, time_zone, updated_at) VALUES (?, ?, ?)
                    ON CONFLICT (device_id) DO UPDATE SET time_zone = excluded.time_zone,
                        updated_at = excluded.updated_at
                    """)
            let clear = try db.cachedStatement(sql: "DELETE FROM device_tags WHERE device_id = ?")
            let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO device_tags (tag, device_id) VALUES (?, ?)")
            for change in changes {
                if let timeZone = change.timeZone {
                    try zone.execute(arguments: [change.deviceId, timeZone, at])
                }
                if let tags = change.tags {
                    try clear.execute(arguments: [change.deviceId])
                    for tag in tags { try insert.execute(arguments: [tag, change.deviceId]) }
                }
            }
        }
    }

    public func profiles(deviceIds: [String]) async throws -> [String: DeviceProfile] {
        try await database.pool.read { db in
            let zone = try db.cachedStatement(sql: "SELECT time_zone FROM device_profiles WHERE device_id = ?")
            let tags = try db.cachedStatement(sql: "SELECT tag FROM device_tags WHERE device_id = ? ORDER BY tag")
            var found: [String: DeviceProfile] = [:]
            for id in Set(deviceIds) {
                let profile = DeviceProfile(
                    timeZone: try String?.fetchOne(zone, arguments: [id]) ?? nil,
                    tags: try String.fetchAll(tags, arguments: [id]))
                if profile.timeZone != nil || !profile.tags.isEmpty { found[id] = profile }
            }
            return found
        }
    }

    public func devices(taggedWith tag: String) async throws -> [String] {
        try await database.pool.read { db in
            try String.fetchAll(db, sql: "SELECT device_id FROM device_tags WHERE tag = ?", arguments: [tag])
        }
    }

    public func devices(taggedWithAll tags: [String]) async throws -> [String] {
        guard !tags.isEmpty else { return [] }
        // The rarest tag's devices (counted on the key), each probed for the others through the (tag, device_id) key.
        let others = String(
            repeating: " AND EXISTS (SELECT 1 FROM device_tags o WHERE o.tag = ? AND o.device_id = t.device_id)",
            count: tags.count - 1)
        return try await database.pool.read { db in
            var ordered = tags
            if tags.count > 1 {
                let count = try db.cachedStatement(sql: "SELECT count(*) FROM device_tags WHERE tag = ?")
                var sizes: [String: Int] = [:]
                for tag in tags { sizes[tag] = try Int.fetchOne(count, arguments: [tag]) ?? 0 }
                ordered.sort { sizes[$0, default: 0] < sizes[$1, default: 0] }
            }
            return try String.fetchAll(
                db, sql: "SELECT device_id FROM device_tags t WHERE t.tag = ?" + others,
                arguments: StatementArguments(ordered))
        }
    }

    public func devices(inApp app: String) async throws -> [String] {
        try await database.pool.read { db in
            if app == AppNamespace.defaultApp {
                return try String.fetchAll(
                    db, sql: "SELECT DISTINCT device_id FROM apns_tokens WHERE active = 1 AND instr(device_id, '/') = 0"
                )
            }
            // The app's keys are `<app>/...`: the range from "<app>/" up to "<app>0" ('0' follows '/').
            return try String.fetchAll(
                db,
                sql: """
                    SELECT DISTINCT device_id FROM apns_tokens
                    WHERE device_id >= ? AND device_id < ? AND active = 1
                    """, arguments: [app + "/", app + "0"])
        }
    }

    public func devices(inApp app: String, after: String?, limit: Int) async throws -> [String] {
        try await database.pool.read { db in
            // Through the primary key (device_id, token), in its order: a page costs its rows, wherever it starts.
            // No DISTINCT: a device's registrations are next to each other, and are made one here.
            let ids =
                app == AppNamespace.defaultApp
                ? try String.fetchAll(
                    db,
                    sql: """
                        SELECT device_id FROM apns_tokens
                        WHERE device_id > ? AND active = 1 AND instr(device_id, '/') = 0
                        ORDER BY device_id LIMIT ?
                        """, arguments: [after ?? "", limit])
                : try String.fetchAll(
                    db,
                    sql: """
                        SELECT device_id FROM apns_tokens
                        WHERE device_id > ? AND device_id < ? AND active = 1
                        ORDER BY device_id LIMIT ?
                        """, arguments: [max(after ?? "", app + "/"), app + "0", limit])
            return ids.removingAdjacentRepeats()
        }
    }

    public func deactivate(_ deactivation: TokenDeactivation) async throws -> TokenRegistration? {
        try await database.pool.write { db in
            var sql = """
                UPDATE apns_tokens SET active = 0, invalidated_at = ?, reason = ?
                WHERE device_id = ? AND token = ? AND active = 1
                """
            var arguments: StatementArguments = [
                deactivation.invalidatedAt, deactivation.reason, deactivation.deviceId, deactivation.token,
            ]
            if let after = deactivation.unlessRegisteredAfter {
                sql += " AND registered_at <= ?"
                arguments += [after]
            }
            if let registration = deactivation.onlyFor {
                sql += " AND topic = ? AND environment = ?"
                arguments += [registration.topic, registration.environment.rawValue]
            }
            sql += " RETURNING device_id, token, topic, environment, registered_at, active, invalidated_at, reason"
            return try Row.fetchOne(db, sql: sql, arguments: arguments).map(Self.registration)
        }
    }

    static func registration(_ row: Row) -> TokenRegistration {
        TokenRegistration(
            deviceId: row[0], token: row[1], topic: row[2],
            environment: APNsEnvironmentName(rawValue: row[3]) ?? .production, registeredAt: row[4],
            active: row[5], invalidatedAt: row[6], reason: row[7])
    }
}

extension Array where Element: Equatable {
    /// The array with each run of equal elements made one.
    func removingAdjacentRepeats() -> [Element] {
        var kept: [Element] = []
        kept.reserveCapacity(count)
        for element in self where element != kept.last { kept.append(element) }
        return kept
    }
}
