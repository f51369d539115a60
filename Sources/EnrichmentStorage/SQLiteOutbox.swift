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

    public init(database: SQLiteDatabase) { self.database = database }

    public func enqueue(_ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery]) async throws {
        try await database.pool.write { db in try Self.insert(db, push, outcomes: outcomes, deliveries: deliveries) }
    }

    public func enqueue(
        _ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery], cap: FrequencyCap, app: String,
        plan: @Sendable (Set<String>) -> PushPlan?
    ) async throws -> Set<String> {
        // One writer at a time (SQLite): the count and the insert cannot interleave with another push's.
        try await database.pool.write { db in
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
                let at = item.scheduledAt ?? push.createdAt
                let (from, to) = (at - cap.window, at + cap.window)
                let sent = try Int.fetchOne(count, arguments: [item.deviceId, from, to, from, to]) ?? 0
                if sent >= cap.max { capped.insert(item.deviceId) }
            }
            var push = push
            push.plan = plan(capped)
            try Self.insert(
                db, push,
                outcomes: outcomes
                    + capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") },
                deliveries: deliveries.filter { !capped.contains($0.deviceId) })
            return capped
        }
    }

    static func insert(_ db: Database, _ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery])
        throws
    {
        let payload = String(decoding: push.payload.encodedData(), as: UTF8.self)
        let plan = push.plan.map { String(decoding: $0.stored.encodedData(), as: UTF8.self) }
        let known = Dictionary(outcomes.map { ($0.deviceId, $0) }, uniquingKeysWith: { first, _ in first })
        try db.execute(
            sql: """
                INSERT INTO pushes (id, created_at, payload, push_type, priority, expiration, collapse_id, topic,
                    enrich, mode, plan, callback_url, callback_due, origin)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                push.id, push.createdAt, payload, push.pushType.rawValue, push.priority?.rawValue,
                push.expiration?.epochSeconds, push.collapseId, push.topic, push.enrich, push.mode?.rawValue, plan,
                push.callbackURL, push.callbackDueAt, push.origin.stored,
            ])
        // Up to 1,000 devices and their deliveries: bound and run through SQLite's C interface (`RawStatement`).
        let device = RawStatement(
            try db.cachedStatement(
                sql: "INSERT INTO push_devices (push_id, position, device_id, outcome, rule) VALUES (?, ?, ?, ?, ?)"),
            in: db)
        try device.bind(1, push.id)
        for (position, id) in push.deviceIds.enumerated() {
            let outcome = known[id]
            try device.bind(2, position)
            try device.bind(3, id)
            try device.bind(4, outcome?.outcome)
            try device.bind(5, outcome?.rule)
            try device.run()
        }
        let delivery = RawStatement(
            try db.cachedStatement(
                sql: """
                    INSERT INTO deliveries (push_id, device_id, token, topic, environment, apns_id, next_attempt_at,
                        scheduled_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """), in: db)
        try delivery.bind(1, push.id)
        for item in deliveries {
            try delivery.bind(2, item.deviceId)
            try delivery.bind(3, item.token)
            try delivery.bind(4, item.topic)
            try delivery.bind(5, item.environment.rawValue)
            try delivery.bind(6, item.apnsId)
            try delivery.bind(7, item.scheduledAt ?? push.createdAt)
            try delivery.bind(8, item.scheduledAt)
            try delivery.run()
        }
    }

    public func claim(owner: String, limit: Int, now: Double, lease: Double) async throws -> [ClaimedDelivery] {
        try await database.pool.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET lease_owner = ?, lease_until = ?,
                        attempts = attempts + (lease_owner IS NOT NULL),
                        taken_over = taken_over OR lease_owner IS NOT NULL
                    WHERE id IN (
                        SELECT id FROM deliveries
                        WHERE state = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)
                        ORDER BY next_attempt_at, id LIMIT ?)
                    RETURNING id, push_id, device_id, token, topic, environment, apns_id, attempts, scheduled_at
                    """)
            try statement.setArguments([owner, now + lease, now, now, limit])
            var claimed: [ClaimedDelivery] = []
            claimed.reserveCapacity(limit)
            try RawStatement(statement, in: db).forEachRow { row in
                claimed.append(
                    ClaimedDelivery(
                        id: row.int64(0) ?? 0, pushId: row.string(1) ?? "",
                        delivery: NewDelivery(
                            deviceId: row.string(2) ?? "", token: row.string(3) ?? "", topic: row.string(4) ?? "",
                            environment: row.string(5).flatMap(APNsEnvironmentName.init(rawValue:)) ?? .production,
                            apnsId: row.string(6) ?? "", scheduledAt: row.double(8)),
                        attempts: row.int(7) ?? 0))
            }
            return claimed.sorted { $0.id < $1.id }
        }
    }

    public func complete(
        _ updates: [DeliveryUpdate], outcomes: [(pushId: String, outcome: DeviceOutcome)], owner: String
    ) async throws -> Int {
        guard !updates.isEmpty || !outcomes.isEmpty else { return 0 }
        return try await database.pool.write { db in
            let update = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET state = ?, attempts = ?, next_attempt_at = COALESCE(?, next_attempt_at),
                        status = COALESCE(?, status), reason = CASE WHEN ? IS NULL THEN reason ELSE ? END,
                        apns_timestamp = CASE WHEN ? IS NULL THEN apns_timestamp ELSE ? END, error = ?,
                        outcome = COALESCE(?, outcome),
                        rule = COALESCE(?, rule), finished_at = ?, lease_owner = NULL, lease_until = NULL
                    WHERE id = ? AND lease_owner = ? AND state = 'pending'
                    """)
            // A batch's answers, one row each: bound and run through SQLite's C interface (`RawStatement`).
            let raw = RawStatement(update, in: db)
            try raw.bind(14, owner)
            var written = 0
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
                written += try raw.run()
            }
            let device = RawStatement(
                try db.cachedStatement(
                    sql: "UPDATE push_devices SET outcome = ?, rule = ? WHERE push_id = ? AND device_id = ?"),
                in: db)
            for (pushId, outcome) in outcomes {
                try device.bind(1, outcome.outcome)
                try device.bind(2, outcome.rule)
                try device.bind(3, pushId)
                try device.bind(4, outcome.deviceId)
                try device.run()
            }
            return written
        }
    }

    public func releaseClaims(owner: String?) async throws -> Int {
        try await database.pool.write { db in
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

    static func push(_ db: Database, id: String) throws -> PushDefinition? {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT id, created_at, payload, push_type, priority, expiration, collapse_id, topic, enrich, mode,
                        plan, callback_url, origin
                    FROM pushes WHERE id = ?
                    """, arguments: [id])
        else { return nil }
        let devices = try String.fetchAll(
            db, sql: "SELECT device_id FROM push_devices WHERE push_id = ? ORDER BY position", arguments: [id])
        let text: String = row[2]
        return PushDefinition(
            id: row[0], createdAt: row[1], payload: try JSONValue.decode(Data(text.utf8)),
            pushType: try PushType.stored(row[3]),
            priority: try APNsPriority.stored(row[4]), expiration: try APNsExpiration.stored(row[5]),
            collapseId: row[6], topic: row[7], enrich: row[8],
            mode: (row[9] as String?).flatMap(BodyMode.init(rawValue:)), deviceIds: devices,
            plan: try (row[10] as String?).map { try PushPlan(stored: JSONValue.decode(Data($0.utf8))) },
            callbackURL: row[11], origin: PushOrigin(stored: row[12]))
    }

    public func callbacksDue(now: Double, limit: Int) async throws -> [PushCallbackDue] {
        try await database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, callback_url, callback_attempts FROM pushes p
                    WHERE callback_due <= ?
                      AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.push_id = p.id AND d.state = 'pending')
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

    public func cancel(pushId: String, at: Double) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(
                sql: """
                    UPDATE deliveries SET state = 'cancelled', finished_at = ?, error = 'cancelled before it was sent'
                    WHERE push_id = ? AND state = 'pending' AND lease_owner IS NULL
                    """, arguments: [at, pushId])
            return db.changesCount
        }
    }

    public func scheduled(app: String, limit: Int) async throws -> [(pushId: String, pending: Int, nextAt: Double)] {
        // The app's devices are stored under `<app>/` (`AppNamespace`), the default app's without a prefix.
        let (pattern, isDefault) = (AppNamespace.prefix(of: app) + "%", app == AppNamespace.defaultApp)
        // `+push_id`: read the pending deliveries through the due index, not every delivery through the push's.
        return try await database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT push_id, count(*), min(next_attempt_at) FROM deliveries
                    WHERE state = 'pending' AND (CASE WHEN ? THEN instr(device_id, '/') = 0 ELSE device_id LIKE ? END)
                    GROUP BY +push_id ORDER BY min(next_attempt_at), push_id LIMIT ?
                    """, arguments: [isDefault, pattern, limit]
            ).map { ($0[0], $0[1], $0[2]) }
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
            return db.changesCount > 0 ? .recorded : .already
        }
    }

    public func confirmedCount(pushId: String) async throws -> Int {
        try await database.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM receipts WHERE push_id = ?", arguments: [pushId]) ?? 0
        }
    }

    public func report(pushId: String) async throws -> PushReport? {
        try await database.pool.read { db in
            guard let push = try Self.push(db, id: pushId) else { return nil }
            // Up to 1,000 devices and their deliveries, read each time a client looks at the push: through SQLite's
            // C interface (`RawStatement`).
            let devicesRead = RawStatement(
                try db.cachedStatement(
                    sql: "SELECT device_id, outcome, rule FROM push_devices WHERE push_id = ? ORDER BY position"),
                in: db)
            try devicesRead.bind(1, pushId)
            var devices: [(deviceId: String, outcome: String?, rule: String?)] = []
            devices.reserveCapacity(push.deviceIds.count)
            try devicesRead.forEachRow { row in devices.append((row.string(0) ?? "", row.string(1), row.string(2))) }
            let deliveriesRead = RawStatement(
                try db.cachedStatement(
                    sql: """
                        SELECT device_id, token, environment, state, status, reason, apns_id, apns_timestamp, attempts,
                            error, taken_over, scheduled_at
                        FROM deliveries WHERE push_id = ? ORDER BY id
                        """), in: db)
            try deliveriesRead.bind(1, pushId)
            var deliveries: [DeliveryReport] = []
            deliveries.reserveCapacity(push.deviceIds.count)
            try deliveriesRead.forEachRow { row in
                deliveries.append(
                    DeliveryReport(
                        deviceId: row.string(0) ?? "", token: row.string(1) ?? "",
                        environment: row.string(2).flatMap(APNsEnvironmentName.init(rawValue:)) ?? .production,
                        state: row.string(3).flatMap(DeliveryState.init(rawValue:)) ?? .pending, status: row.int(4),
                        reason: row.string(5), apnsId: row.string(6) ?? "", apnsTimestamp: row.int64(7),
                        attempts: row.int(8) ?? 0, error: row.string(9), resentAfterTakeover: row.bool(10),
                        scheduledAt: row.double(11)))
            }
            return PushReport(push: push, devices: devices, deliveries: deliveries)
        }
    }

    public func pendingCount(pushId: String) async throws -> Int {
        try await database.pool.read { db in
            try Int.fetchOne(
                db, sql: "SELECT count(*) FROM deliveries WHERE push_id = ? AND state = 'pending'",
                arguments: [pushId]) ?? 0
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
