import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import GRDB

/// The outbox in SQLite: `pushes`, `push_devices` and `deliveries`, committed in one transaction per push.
///
/// One process owns the file, so a claim is a lease column set in the same statement that selects the due rows.
public struct SQLiteOutbox: OutboxStore {
    let database: SQLiteDatabase
    /// Where the last full claim stopped in the due order (`SQLiteOutbox+Claim.swift`).
    let cursor = ClaimCursor()

    public init(database: SQLiteDatabase) { self.database = database }

    public func enqueue(_ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery]) async throws {
        try await database.pool.write { db in
            try Self.insertPush(db, push, audience: nil, defaultZone: nil)
            try Self.insertChunk(
                db, pushId: push.id, deviceIds: push.deviceIds, outcomes: outcomes, deliveries: deliveries, from: 0)
        }
    }

    public func enqueue(
        _ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery], cap: FrequencyCap, app: String,
        plan: @Sendable (Set<String>) -> PushPlan?
    ) async throws -> Set<String> {
        // One writer at a time (SQLite): the count and the insert cannot interleave with another push's.
        try await database.pool.write { db in
            let capped = try Self.capped(db, deliveries: deliveries, createdAt: push.createdAt, cap: cap)
            var push = push
            push.plan = plan(capped)
            try Self.insertPush(db, push, audience: nil, defaultZone: nil)
            try Self.insertChunk(
                db, pushId: push.id, deviceIds: push.deviceIds,
                outcomes: outcomes
                    + capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") },
                deliveries: deliveries.filter { !capped.contains($0.deviceId) }, from: 0)
            return capped
        }
    }

    /// The devices of `deliveries` that already have `cap.max` pushes a person sees within the cap's window of
    /// their send time.
    static func capped(_ db: Database, deliveries: [NewDelivery], createdAt: Double, cap: FrequencyCap) throws
        -> Set<String>
    {
        let count = try db.cachedStatement(
            sql: """
                SELECT count(DISTINCT d.push_id) FROM deliveries d JOIN pushes p ON p.id = d.push_id
                WHERE d.device_id = ? AND p.push_type NOT IN ('liveactivity', 'background') AND p.origin IS NULL
                AND (
                    (d.state = 'pending' AND d.next_attempt_at > ? AND d.next_attempt_at < ?)
                    OR (d.state = 'delivered' AND d.finished_at > ? AND d.finished_at < ?))
                """)
        var capped = Set<String>()
        var seen = Set<String>()
        for item in deliveries where seen.insert(item.deviceId).inserted {
            let at = item.scheduledAt ?? createdAt
            let (from, to) = (at - cap.window, at + cap.window)
            let sent = try Int.fetchOne(count, arguments: [item.deviceId, from, to, from, to]) ?? 0
            if sent >= cap.max { capped.insert(item.deviceId) }
        }
        return capped
    }

    /// Writes the push's row; `audience` (JSON) makes it a push still resolving.
    static func insertPush(_ db: Database, _ push: PushDefinition, audience: String?, defaultZone: String?) throws {
        let payload = String(decoding: push.payload.encodedData(), as: UTF8.self)
        let plan = push.plan.map { String(decoding: $0.stored.encodedData(), as: UTF8.self) }
        try db.execute(
            sql: """
                INSERT INTO pushes (id, created_at, payload, push_type, priority, expiration, collapse_id, topic,
                    enrich, mode, plan, callback_url, callback_due, origin, app, audience, resolving, default_zone,
                    rate)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                push.id, push.createdAt, payload, push.pushType.rawValue, push.priority?.rawValue,
                push.expiration?.epochSeconds, push.collapseId, push.topic, push.enrich, push.mode?.rawValue, plan,
                push.callbackURL, push.callbackDueAt, push.origin.stored, push.app, audience, audience != nil,
                defaultZone, push.rate,
            ])
    }

    /// Writes devices of a push (positions from `from` on) with their outcomes, and their deliveries, and adds
    /// them to the push's counts.
    static func insertChunk(
        _ db: Database, pushId: String, deviceIds: [String], outcomes: [DeviceOutcome], deliveries: [NewDelivery],
        from: Int
    ) throws {
        let known = Dictionary(outcomes.map { ($0.deviceId, $0) }, uniquingKeysWith: { first, _ in first })
        // Many devices and their deliveries: bound and run through SQLite's C interface (`RawStatement`).
        let device = RawStatement(
            try db.cachedStatement(
                sql: "INSERT INTO push_devices (push_id, position, device_id, outcome, rule) VALUES (?, ?, ?, ?, ?)"),
            in: db)
        try device.bind(1, pushId)
        var counts: [String: Int] = ["matched": deviceIds.count]
        for (offset, id) in deviceIds.enumerated() {
            let outcome = known[id]
            try device.bind(2, from + offset)
            try device.bind(3, id)
            try device.bind(4, outcome?.outcome)
            try device.bind(5, outcome?.rule)
            try device.run()
        }
        var perDevice: [String: Int] = [:]
        for item in deliveries { perDevice[item.deviceId, default: 0] += 1 }
        for id in deviceIds where perDevice[id] == nil {
            counts["rule:" + (known[id]?.rule ?? "unknown"), default: 0] += 1
        }
        let delivery = RawStatement(
            try db.cachedStatement(
                sql: """
                    INSERT INTO deliveries (push_id, device_id, token, topic, environment, apns_id, next_attempt_at,
                        scheduled_at, shared)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """), in: db)
        let createdAt = try Double.fetchOne(db, sql: "SELECT created_at FROM pushes WHERE id = ?", arguments: [pushId])
        try delivery.bind(1, pushId)
        for item in deliveries {
            try delivery.bind(2, item.deviceId)
            try delivery.bind(3, item.token)
            try delivery.bind(4, item.topic)
            try delivery.bind(5, item.environment.rawValue)
            try delivery.bind(6, item.apnsId)
            try delivery.bind(7, item.scheduledAt ?? createdAt ?? 0)
            try delivery.bind(8, item.scheduledAt)
            try delivery.bind(9, (perDevice[item.deviceId] ?? 0) > 1 ? 1 : 0)
            try delivery.run()
        }
        if !deliveries.isEmpty {
            counts[DeliveryState.pending.rawValue] = deliveries.count
            // Android's share, kept beside the totals (the report's per-platform counts; iOS is the rest).
            let android = deliveries.reduce(0) { $0 + ($1.environment == .fcm ? 1 : 0) }
            if android > 0 { counts[PushCounts.androidKey(.pending)] = android }
            // The push's deliveries are the ids from its first to its last (pages are read through that range).
            // A paced push: when the delivery after its last may be due (its `ends_at`).
            let last = db.lastInsertedRowID
            let latest = deliveries.compactMap(\.scheduledAt).max()
            try db.execute(
                sql: """
                    UPDATE pushes SET first_delivery = COALESCE(first_delivery, ?), last_delivery = ?,
                        pace_next = CASE WHEN rate IS NULL OR ? IS NULL THEN pace_next
                                         ELSE max(COALESCE(pace_next, 0), ? + 1.0 / rate) END
                    WHERE id = ?
                    """, arguments: [last - Int64(deliveries.count) + 1, last, latest, latest, pushId])
        }
        try bump(db, pushId: pushId, counts)
    }

    /// Adds to the push's counts (a negative number takes away).
    static func bump(_ db: Database, pushId: String, _ counts: [String: Int]) throws {
        let upsert = RawStatement(
            try db.cachedStatement(
                sql: """
                    INSERT INTO push_counts (push_id, key, n) VALUES (?, ?, ?)
                    ON CONFLICT (push_id, key) DO UPDATE SET n = n + excluded.n
                    """), in: db)
        try upsert.bind(1, pushId)
        for (key, n) in counts where n != 0 {
            try upsert.bind(2, key)
            try upsert.bind(3, n)
            try upsert.run()
        }
    }

    public func complete(_ updates: [DeliveryUpdate], owner: String) async throws -> Int {
        guard !updates.isEmpty else { return 0 }
        return try await database.pool.write { db in
            let update = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET state = ?, attempts = ?, next_attempt_at = COALESCE(?, next_attempt_at),
                        status = COALESCE(?, status), reason = CASE WHEN ? IS NULL THEN reason ELSE ? END,
                        apns_timestamp = CASE WHEN ? IS NULL THEN apns_timestamp ELSE ? END, error = ?,
                        outcome = COALESCE(?, outcome),
                        rule = COALESCE(?, rule), finished_at = ?, lease_owner = NULL, lease_until = NULL
                    WHERE id = ? AND lease_owner = ? AND state = 'pending'
                    RETURNING push_id, environment
                    """)
            // A batch's answers, one row each: bound and run through SQLite's C interface (`RawStatement`).
            let raw = RawStatement(update, in: db)
            try raw.bind(14, owner)
            var written = 0
            // Each written delivery that leaves `pending` moves one count of its push.
            var moved: [String: [String: Int]] = [:]
            for item in updates {
                // An update without an answer from APNs (expired before a retry, waiting for a closed circuit)
                // keeps the last answer's status, reason and timestamp.
                try raw.bind(1, item.state.rawValue)
                try raw.bind(2, item.attempts)
                try raw.bind(3, item.nextAttemptAt)
                try raw.bind(4, item.status)
                try raw.bind(5, item.status)
                try raw.bind(6, item.reason)
                try raw.bind(7, item.status)
                try raw.bind(8, item.apnsTimestamp)
                try raw.bind(9, item.error)
                try raw.bind(10, item.outcome)
                try raw.bind(11, item.rule)
                try raw.bind(12, item.finishedAt)
                try raw.bind(13, item.id)
                try raw.forEachRow { row in
                    written += 1
                    guard item.state != .pending, let pushId = row.string(0) else { return }
                    moved[pushId, default: [:]][DeliveryState.pending.rawValue, default: 0] -= 1
                    moved[pushId, default: [:]][item.state.rawValue, default: 0] += 1
                    if row.string(1) == APNsEnvironmentName.fcm.rawValue {
                        moved[pushId, default: [:]][PushCounts.androidKey(.pending), default: 0] -= 1
                        moved[pushId, default: [:]][PushCounts.androidKey(item.state), default: 0] += 1
                    }
                }
            }
            for (pushId, counts) in moved { try Self.bump(db, pushId: pushId, counts) }
            return written
        }
    }

    public func releaseClaims(owner: String?) async throws -> Int {
        // Released deliveries lie behind the cursor: the next claim looks from the start.
        defer { cursor.reset() }
        return try await database.pool.write { db in
            if let owner {
                try db.execute(
                    sql: "UPDATE deliveries SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?",
                    arguments: [owner])
            } else {
                // A previous process held these: each may have been on the wire when it stopped, so sending it
                // again counts as an attempt and is reported.
                try db.execute(
                    sql: """
                        UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, attempts = attempts + 1,
                            taken_over = 1
                        WHERE lease_owner IS NOT NULL
                        """)
            }
            return db.changesCount
        }
    }

    public func push(id: String) async throws -> PushDefinition? {
        try await database.pool.read { db in try Self.push(db, id: id) }
    }

    static let pushColumns = """
        id, created_at, payload, push_type, priority, expiration, collapse_id, topic, enrich, mode, plan,
        callback_url, origin, app, rate
        """

    static func push(_ db: Database, id: String) throws -> PushDefinition? {
        guard let row = try Row.fetchOne(db, sql: "SELECT \(pushColumns) FROM pushes WHERE id = ?", arguments: [id])
        else { return nil }
        return try push(row)
    }

    /// A push read back from the columns `pushColumns` names, in that order (its devices are not listed).
    static func push(_ row: Row) throws -> PushDefinition {
        let text: String = row[2]
        return PushDefinition(
            id: row[0], createdAt: row[1], payload: try JSONValue.decode(Data(text.utf8)),
            pushType: try PushType.stored(row[3]),
            priority: try APNsPriority.stored(row[4]), expiration: try APNsExpiration.stored(row[5]),
            collapseId: row[6], topic: row[7], enrich: row[8],
            mode: (row[9] as String?).flatMap(BodyMode.init(rawValue:)), deviceIds: [],
            plan: try (row[10] as String?).map { try PushPlan(stored: JSONValue.decode(Data($0.utf8))) },
            callbackURL: row[11], origin: PushOrigin(stored: row[12]),
            app: (row[13] as String?) ?? AppNamespace.defaultApp, rate: row[14])
    }

    public func callbacksDue(now: Double, limit: Int) async throws -> [PushCallbackDue] {
        try await database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, callback_url, callback_attempts FROM pushes p
                    WHERE callback_due <= ? AND resolving = 0
                      AND COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'pending'), 0) = 0
                    ORDER BY callback_due LIMIT ?
                    """, arguments: [now, limit]
            ).map { PushCallbackDue(pushId: $0[0], url: $0[1], attempts: $0[2]) }
        }
    }

    public func claimCallback(pushId: String, now: Double, until: Double) async throws -> Bool {
        try await database.pool.write { db in
            try db.execute(
                sql: "UPDATE pushes SET callback_due = ? WHERE id = ? AND callback_due <= ?",
                arguments: [until, pushId, now])
            return db.changesCount == 1
        }
    }

    public func recordCallback(pushId: String, at: Double, outcome: String, retryAt: Double?) async throws {
        try await database.pool.write { db in
            try db.execute(
                sql: """
                    UPDATE pushes SET callback_due = ?, callback_attempts = callback_attempts + 1,
                        callback_outcome = ?, callback_at = ?
                    WHERE id = ?
                    """, arguments: [retryAt, outcome, at, pushId])
        }
    }

    public func callbackStatus(pushId: String) async throws -> PushCallbackStatus? {
        try await database.pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT callback_url, callback_attempts, callback_outcome, callback_at, callback_due
                        FROM pushes WHERE id = ? AND callback_url IS NOT NULL
                        """, arguments: [pushId])
            else { return nil }
            return PushCallbackStatus(
                url: row[0], attempts: row[1], outcome: row[2], lastAttemptAt: row[3], nextAttemptAt: row[4])
        }
    }

    public func confirm(pushId: String, deviceId: String, at: Double) async throws -> ReceiptOutcome {
        try await database.pool.write { db in
            let sent =
                try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT 1 FROM deliveries WHERE push_id = ? AND device_id = ? AND state IN ('delivered', 'pending')
                        LIMIT 1
                        """, arguments: [pushId, deviceId]) ?? false
            guard sent else { return .notSent }
            try db.execute(
                sql: "INSERT INTO receipts (push_id, device_id, received_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                arguments: [pushId, deviceId, at])
            guard db.changesCount > 0 else { return .already }
            try Self.bump(db, pushId: pushId, ["confirmed": 1])
            return .recorded
        }
    }

    public func confirmedCount(pushId: String) async throws -> Int {
        try await database.pool.read { db in
            try Int.fetchOne(
                db, sql: "SELECT n FROM push_counts WHERE push_id = ? AND key = 'confirmed'", arguments: [pushId]) ?? 0
        }
    }

    public func depth() async throws -> Int {
        // The pending deliveries' own index: the planner would otherwise count them through the push's index, every
        // delivery ever made.
        try await database.pool.read { db in
            try Int.fetchOne(
                db, sql: "SELECT count(*) FROM deliveries INDEXED BY deliveries_due WHERE state = 'pending'") ?? 0
        }
    }

    public func nextDue() async throws -> Double? {
        try await database.pool.read { db in
            try Double.fetchOne(
                db,
                sql: """
                    SELECT min(t) FROM (
                        SELECT min(next_attempt_at) AS t FROM deliveries WHERE state = 'pending' AND lease_owner IS NULL
                        UNION ALL
                        SELECT min(max(next_attempt_at, lease_until)) FROM deliveries
                        WHERE state = 'pending' AND lease_owner IS NOT NULL)
                    """)
        }
    }
}
