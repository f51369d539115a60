import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import PostgresNIO

/// A push's life past its acceptance: its audience resolved chunk by chunk, its cancellation, its deletion after the
/// retention period, and the deletion of a device's part in every push.
extension PostgresOutbox {
    /// Migration `v15-push-scale`: the columns and the counts table, filled from what is stored.
    static let scaleMigration = [
        "ALTER TABLE pushes ADD COLUMN app TEXT",
        "ALTER TABLE pushes ADD COLUMN audience TEXT",
        "ALTER TABLE pushes ADD COLUMN resolving BOOLEAN NOT NULL DEFAULT false",
        "ALTER TABLE pushes ADD COLUMN resolved_through TEXT",
        "ALTER TABLE pushes ADD COLUMN resolve_owner TEXT",
        "ALTER TABLE pushes ADD COLUMN resolve_until DOUBLE PRECISION",
        "ALTER TABLE pushes ADD COLUMN default_zone TEXT",
        "ALTER TABLE pushes ADD COLUMN rate DOUBLE PRECISION",
        "ALTER TABLE pushes ADD COLUMN pace_next DOUBLE PRECISION",
        "ALTER TABLE pushes ADD COLUMN cancelled_at DOUBLE PRECISION",
        "ALTER TABLE pushes ADD COLUMN first_delivery BIGINT",
        "ALTER TABLE pushes ADD COLUMN last_delivery BIGINT",
        "ALTER TABLE deliveries ADD COLUMN shared BOOLEAN NOT NULL DEFAULT false",
        """
        CREATE TABLE push_counts (
            push_id TEXT NOT NULL,
            key TEXT NOT NULL,
            n BIGINT NOT NULL,
            PRIMARY KEY (push_id, key)
        )
        """,
        """
        UPDATE pushes SET app = COALESCE((
            SELECT CASE WHEN strpos(d.device_id, '/') > 0 THEN split_part(d.device_id, '/', 1) ELSE 'default' END
            FROM push_devices d WHERE d.push_id = pushes.id ORDER BY d.position LIMIT 1), 'default')
        """,
        """
        UPDATE pushes SET first_delivery = (SELECT min(id) FROM deliveries d WHERE d.push_id = pushes.id),
                          last_delivery = (SELECT max(id) FROM deliveries d WHERE d.push_id = pushes.id)
        """,
        """
        UPDATE deliveries SET shared = true WHERE (push_id, device_id) IN (
            SELECT push_id, device_id FROM deliveries GROUP BY push_id, device_id HAVING count(*) > 1)
        """,
        "INSERT INTO push_counts (push_id, key, n) SELECT push_id, state, count(*) FROM deliveries GROUP BY 1, 2",
        "INSERT INTO push_counts (push_id, key, n) SELECT push_id, 'matched', count(*) FROM push_devices GROUP BY 1",
        """
        INSERT INTO push_counts (push_id, key, n)
            SELECT push_id, 'rule:' || COALESCE(rule, 'unknown'), count(*) FROM push_devices pd
            WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.push_id = pd.push_id AND d.device_id = pd.device_id)
            GROUP BY 1, 2
        """,
        "INSERT INTO push_counts (push_id, key, n) SELECT push_id, 'confirmed', count(*) FROM receipts GROUP BY 1",
        "DROP INDEX deliveries_push",
        "CREATE INDEX deliveries_push ON deliveries (push_id, state, next_attempt_at)",
        "CREATE INDEX deliveries_shared ON deliveries (push_id) WHERE shared",
        "CREATE INDEX push_devices_device ON push_devices (device_id)",
        "CREATE INDEX receipts_device ON receipts (device_id)",
        "CREATE INDEX pushes_by_app ON pushes (app, created_at, id)",
        "CREATE INDEX pushes_by_created ON pushes (created_at)",
        "CREATE INDEX pushes_resolving ON pushes (resolve_until) WHERE resolving",
        "CREATE INDEX pushes_cancelled ON pushes (cancelled_at) WHERE cancelled_at IS NOT NULL",
    ]

    public func beginPush(_ push: PushDefinition, audience: String, defaultZone: String?) async throws {
        let logger = database.logger
        try await database.withTransaction { connection in
            try await Self.insertPush(connection, push, audience: audience, defaultZone: defaultZone, logger: logger)
            // Every node's resolver looks at commit (one of them takes it).
            try await PostgresChangeFeed.notify(.deliveries, on: connection, logger: logger)
        }
    }

    public func claimResolution(owner: String, now: Double, lease: Double, limit: Int) async throws
        -> [ResolutionClaim]
    {
        let rows = try await database.query(
            """
            WITH taken AS (
                UPDATE pushes SET resolve_owner = \(owner), resolve_until = \(now + lease)
                WHERE id IN (
                    SELECT id FROM pushes
                    WHERE resolving AND audience IS NOT NULL AND (resolve_until IS NULL OR resolve_until < \(now))
                    ORDER BY resolve_until NULLS FIRST LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING id)
            SELECT \(unescaped: Self.pushColumns), audience, resolved_through, default_zone, pace_next,
                COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'matched'), 0)
            FROM pushes p WHERE id IN (SELECT id FROM taken) ORDER BY id
            """)
        var claims: [ResolutionClaim] = []
        for try await row in rows {
            let columns = try row.decode(
                (
                    String, Double, String, String, Int?, Int64?, String?, String?, Bool, String?, String?, String?,
                    String?, String?, Double?, String?, String?, String?, Double?, Int64
                ).self)
            claims.append(
                ResolutionClaim(
                    push: try Self.push(row), audience: columns.15 ?? "{}", through: columns.16,
                    defaultZone: columns.17, matched: Int(columns.19), paceNext: columns.18))
        }
        return claims
    }

    public func enqueueChunk(_ chunk: ResolvedChunk, owner: String, leaseUntil: Double) async throws -> Set<String>? {
        let logger = database.logger
        return try await database.withTransaction { connection -> Set<String>? in
            // The push's row, locked: a cancel or another node's takeover waits for this chunk, or wins before it.
            let rows = try await connection.run(
                """
                SELECT resolving, resolve_owner, cancelled_at, plan, created_at,
                    COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'matched'), 0)
                FROM pushes p WHERE id = \(chunk.pushId) FOR UPDATE
                """, logger: logger)
            guard
                let (resolving, holder, cancelledAt, planText, createdAt, matched) = try await rows.decode(
                    (Bool, String?, Double?, String?, Double, Int64).self
                ).first(where: { _ in true }), resolving, holder == owner
            else { return nil }
            if cancelledAt != nil {
                try await connection.run(
                    "UPDATE pushes SET resolving = false WHERE id = \(chunk.pushId)", logger: logger)
                return nil
            }
            let (capped, planStored, dueAt) = try await Self.writeChunk(
                connection, chunk, createdAt: createdAt, plan: planText, from: Int(matched), logger: logger)
            let through: String? = chunk.through.isEmpty ? nil : chunk.through
            try await connection.run(
                """
                UPDATE pushes SET resolved_through = COALESCE(\(through), resolved_through),
                    resolve_until = \(leaseUntil), resolving = \(!chunk.last),
                    pace_next = COALESCE(\(chunk.paceNext), pace_next), plan = COALESCE(\(planStored), plan),
                    callback_due = CASE WHEN callback_url IS NULL THEN NULL ELSE COALESCE(\(dueAt), callback_due) END
                WHERE id = \(chunk.pushId)
                """, logger: logger)
            return capped
        }
    }

    /// Caps and writes a chunk's devices, their outcomes and deliveries (positions from `from` on); returns the
    /// devices capped, the push's plan (`stored`, JSON) merged with what the chunk holds, and when its callback is
    /// due.
    static func writeChunk(
        _ connection: PostgresConnection, _ chunk: ResolvedChunk, createdAt: Double, plan stored: String?, from: Int,
        logger: Logger
    ) async throws -> (capped: Set<String>, plan: String?, dueAt: Double?) {
        var capped = Set<String>()
        if let cap = chunk.cap, !chunk.deliveries.isEmpty {
            capped = try await Self.capped(
                connection, deliveries: chunk.deliveries, createdAt: createdAt, cap: cap, app: chunk.app,
                logger: logger)
        }
        let kept = capped.isEmpty ? chunk.deliveries : chunk.deliveries.filter { !capped.contains($0.deviceId) }
        try await Self.insertChunk(
            connection, pushId: chunk.pushId, createdAt: createdAt, deviceIds: chunk.deviceIds,
            outcomes: chunk.outcomes
                + capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") },
            deliveries: kept, from: from, logger: logger)
        var plan = try stored.map { try PushPlan(stored: JSONValue.decode(Data($0.utf8))) }
        plan = plan?.merged(held: chunk.held, sendTimes: kept.map { $0.scheduledAt ?? createdAt })
        let dueAt = plan.flatMap { push in push.lastSendAt.map { max(createdAt, $0) } }
        return (capped, plan.map { String(decoding: $0.stored.encodedData(), as: UTF8.self) }, dueAt)
    }

    public func markCancelled(pushId: String, at: Double) async throws -> Bool {
        let rows = try await database.query(
            """
            UPDATE pushes SET cancelled_at = COALESCE(cancelled_at, \(at)), resolving = false WHERE id = \(pushId)
            RETURNING 1
            """)
        return try await rows.decode(Int.self).first { _ in true } != nil
    }

    public func sweepCancelled(at: Double, limit: Int) async throws -> Int {
        let logger = database.logger
        return try await database.withTransaction { connection in
            let rows = try await connection.run(
                """
                UPDATE deliveries SET state = 'cancelled', finished_at = \(at), error = 'cancelled before it was sent'
                WHERE id IN (
                    SELECT d.id FROM pushes p JOIN deliveries d ON d.push_id = p.id AND d.state = 'pending'
                    WHERE p.cancelled_at IS NOT NULL AND d.lease_owner IS NULL LIMIT \(limit)
                    FOR UPDATE OF d SKIP LOCKED)
                RETURNING push_id, environment
                """, logger: logger)
            var moved: [String: [String: Int]] = [:]
            var total = 0
            for try await (pushId, environment) in rows.decode((String, String).self) {
                moved[pushId, default: [:]][DeliveryState.pending.rawValue, default: 0] -= 1
                moved[pushId, default: [:]][DeliveryState.cancelled.rawValue, default: 0] += 1
                if environment == APNsEnvironmentName.fcm.rawValue {
                    moved[pushId, default: [:]][PushCounts.androidKey(.pending), default: 0] -= 1
                    moved[pushId, default: [:]][PushCounts.androidKey(.cancelled), default: 0] += 1
                }
                total += 1
            }
            for pushId in moved.keys.sorted() {
                try await Self.bump(connection, pushId: pushId, moved[pushId] ?? [:], logger: logger)
            }
            return total
        }
    }

    public func claimedBefore(pushId: String, at: Double, lease: Double) async throws -> Int {
        try await database.query(
            """
            SELECT count(*)::int8 FROM deliveries
            WHERE push_id = \(pushId) AND state = 'pending' AND lease_owner IS NOT NULL AND lease_until <= \(at + lease)
            """
        ).decode(Int.self).first { _ in true } ?? 0
    }

    public func retain(before: Double, limit: Int) async throws -> Int {
        let logger = database.logger
        return try await database.withTransaction { connection in
            // The oldest push that is done (nothing pending or resolving, no callback to post), locked for this
            // transaction (another node's retention takes the next).
            let found = try await connection.run(
                """
                SELECT id FROM pushes p
                WHERE created_at < \(before) AND NOT resolving AND callback_due IS NULL
                  AND COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'pending'), 0) = 0
                ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED
                """, logger: logger)
            guard let pushId = try await found.decode(String.self).first(where: { _ in true }) else { return 0 }
            // Deliveries first, then the push's devices and receipts, within the batch's rows.
            var left = limit
            for (table, key) in [("deliveries", "id"), ("push_devices", "device_id"), ("receipts", "device_id")]
            where left > 0 {
                left -= try await Self.count(
                    connection,
                    PostgresQuery(
                        unsafeSQL: """
                            WITH gone AS (DELETE FROM \(table) WHERE push_id = $1 AND \(key) IN (
                                SELECT \(key) FROM \(table) WHERE push_id = $1 LIMIT $2) RETURNING 1)
                            SELECT count(*)::int8 FROM gone
                            """,
                        binds: {
                            var binds = PostgresBindings()
                            binds.append(pushId)
                            binds.append(Int64(left))
                            return binds
                        }()), logger: logger)
            }
            if left > 0 {
                try await connection.run("DELETE FROM push_counts WHERE push_id = \(pushId)", logger: logger)
                try await connection.run("DELETE FROM pushes WHERE id = \(pushId)", logger: logger)
                left -= 1
            }
            return limit - left
        }
    }

    static func count(_ connection: PostgresConnection, _ query: PostgresQuery, logger: Logger) async throws -> Int {
        try await connection.run(query, logger: logger).decode(Int.self).first { _ in true } ?? 0
    }

    public func deleteDevice(_ deviceId: String) async throws -> Int {
        let logger = database.logger
        return try await database.withTransaction { connection in
            var moved: [String: [String: Int]] = [:]
            for try await (pushId, state, android, n) in try await connection.run(
                """
                SELECT push_id, state, environment = 'fcm', count(*)::int8 FROM deliveries
                WHERE device_id = \(deviceId) GROUP BY push_id, state, environment = 'fcm'
                """, logger: logger
            ).decode((String, String, Bool, Int).self) {
                moved[pushId, default: [:]][state, default: 0] -= n
                if android, let known = DeliveryState(rawValue: state) {
                    moved[pushId, default: [:]][PushCounts.androidKey(known), default: 0] -= n
                }
            }
            for try await (pushId, rule, hasDelivery) in try await connection.run(
                """
                SELECT push_id, COALESCE(rule, 'unknown'),
                    EXISTS (SELECT 1 FROM deliveries d WHERE d.push_id = pd.push_id AND d.device_id = pd.device_id)
                FROM push_devices pd WHERE device_id = \(deviceId)
                """, logger: logger
            ).decode((String, String, Bool).self) {
                moved[pushId, default: [:]]["matched", default: 0] -= 1
                if !hasDelivery { moved[pushId, default: [:]]["rule:" + rule, default: 0] -= 1 }
            }
            for try await pushId in try await connection.run(
                "SELECT push_id FROM receipts WHERE device_id = \(deviceId)", logger: logger
            ).decode(String.self) {
                moved[pushId, default: [:]]["confirmed", default: 0] -= 1
            }
            var removed = 0
            removed += try await Self.count(
                connection,
                "WITH gone AS (DELETE FROM deliveries WHERE device_id = \(deviceId) RETURNING 1) SELECT count(*)::int8 FROM gone",
                logger: logger)
            removed += try await Self.count(
                connection,
                "WITH gone AS (DELETE FROM push_devices WHERE device_id = \(deviceId) RETURNING 1) SELECT count(*)::int8 FROM gone",
                logger: logger)
            removed += try await Self.count(
                connection,
                "WITH gone AS (DELETE FROM receipts WHERE device_id = \(deviceId) RETURNING 1) SELECT count(*)::int8 FROM gone",
                logger: logger)
            for pushId in moved.keys.sorted() {
                try await Self.bump(connection, pushId: pushId, moved[pushId] ?? [:], logger: logger)
            }
            return removed
        }
    }
}
