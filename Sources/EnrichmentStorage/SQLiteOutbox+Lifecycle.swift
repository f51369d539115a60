import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import GRDB

/// A push's life past its acceptance: its audience resolved chunk by chunk, its cancellation, its deletion after the
/// retention period, and the deletion of a device's part in every push.
extension SQLiteOutbox {
    /// Migration `v14-push-scale`: the columns and the counts table, filled from what is stored.
    static let scaleMigration = """
        ALTER TABLE pushes ADD COLUMN app TEXT;
        ALTER TABLE pushes ADD COLUMN audience TEXT;
        ALTER TABLE pushes ADD COLUMN resolving INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE pushes ADD COLUMN resolved_through TEXT;
        ALTER TABLE pushes ADD COLUMN resolve_owner TEXT;
        ALTER TABLE pushes ADD COLUMN resolve_until REAL;
        ALTER TABLE pushes ADD COLUMN default_zone TEXT;
        ALTER TABLE pushes ADD COLUMN rate REAL;
        ALTER TABLE pushes ADD COLUMN pace_next REAL;
        ALTER TABLE pushes ADD COLUMN cancelled_at REAL;
        ALTER TABLE pushes ADD COLUMN first_delivery INTEGER;
        ALTER TABLE pushes ADD COLUMN last_delivery INTEGER;
        ALTER TABLE deliveries ADD COLUMN shared INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE push_counts (
            push_id TEXT NOT NULL,
            key TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (push_id, key)
        ) WITHOUT ROWID;
        UPDATE pushes SET app = COALESCE((
            SELECT CASE WHEN instr(d.device_id, '/') > 0 THEN substr(d.device_id, 1, instr(d.device_id, '/') - 1)
                        ELSE 'default' END
            FROM push_devices d WHERE d.push_id = pushes.id ORDER BY d.position LIMIT 1), 'default');
        UPDATE pushes SET first_delivery = (SELECT min(id) FROM deliveries d WHERE d.push_id = pushes.id),
                          last_delivery = (SELECT max(id) FROM deliveries d WHERE d.push_id = pushes.id);
        UPDATE deliveries SET shared = 1 WHERE (push_id, device_id) IN (
            SELECT push_id, device_id FROM deliveries GROUP BY push_id, device_id HAVING count(*) > 1);
        INSERT INTO push_counts (push_id, key, n)
            SELECT push_id, state, count(*) FROM deliveries GROUP BY push_id, state;
        INSERT INTO push_counts (push_id, key, n)
            SELECT push_id, 'matched', count(*) FROM push_devices GROUP BY push_id;
        INSERT INTO push_counts (push_id, key, n)
            SELECT push_id, 'rule:' || COALESCE(rule, 'unknown'), count(*) FROM push_devices pd
            WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.push_id = pd.push_id AND d.device_id = pd.device_id)
            GROUP BY push_id, COALESCE(rule, 'unknown');
        INSERT INTO push_counts (push_id, key, n)
            SELECT push_id, 'confirmed', count(*) FROM receipts GROUP BY push_id;
        DROP INDEX deliveries_push;
        CREATE INDEX deliveries_push ON deliveries (push_id, state, next_attempt_at);
        CREATE INDEX deliveries_shared ON deliveries (push_id) WHERE shared = 1;
        CREATE INDEX push_devices_device ON push_devices (device_id);
        CREATE INDEX receipts_device ON receipts (device_id);
        CREATE INDEX pushes_by_app ON pushes (app, created_at, id);
        CREATE INDEX pushes_by_created ON pushes (created_at);
        CREATE INDEX pushes_resolving ON pushes (resolve_until) WHERE resolving = 1;
        CREATE INDEX pushes_cancelled ON pushes (cancelled_at) WHERE cancelled_at IS NOT NULL;
        """

    public func beginPush(_ push: PushDefinition, audience: String, defaultZone: String?) async throws {
        try await database.pool.write { db in
            try Self.insertPush(db, push, audience: audience, defaultZone: defaultZone)
        }
    }

    public func claimResolution(owner: String, now: Double, lease: Double, limit: Int) async throws
        -> [ResolutionClaim]
    {
        try await database.pool.write { db in
            let ids = try String.fetchAll(
                db,
                sql: """
                    UPDATE pushes SET resolve_owner = ?, resolve_until = ?
                    WHERE id IN (
                        SELECT id FROM pushes INDEXED BY pushes_resolving
                        WHERE resolving = 1 AND audience IS NOT NULL AND (resolve_until IS NULL OR resolve_until < ?)
                        ORDER BY resolve_until LIMIT ?)
                    RETURNING id
                    """, arguments: [owner, now + lease, now, limit])
            return try ids.sorted().compactMap { id in
                guard
                    let row = try Row.fetchOne(
                        db,
                        sql: """
                            SELECT \(Self.pushColumns), audience, resolved_through, default_zone, pace_next,
                                COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'matched'), 0)
                            FROM pushes p WHERE id = ?
                            """, arguments: [id])
                else { return nil }
                return ResolutionClaim(
                    push: try Self.push(row), audience: row[15] ?? "{}", through: row[16], defaultZone: row[17],
                    matched: row[19], paceNext: row[18])
            }
        }
    }

    public func enqueueChunk(_ chunk: ResolvedChunk, owner: String, leaseUntil: Double) async throws -> Set<String>? {
        try await database.pool.write { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT resolving, resolve_owner, cancelled_at, plan, created_at,
                            COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'matched'), 0)
                        FROM pushes p WHERE id = ?
                        """, arguments: [chunk.pushId]),
                row[0] as Bool, (row[1] as String?) == owner
            else { return nil }
            if (row[2] as Double?) != nil {
                // Cancelled: the resolution ends here.
                try db.execute(sql: "UPDATE pushes SET resolving = 0 WHERE id = ?", arguments: [chunk.pushId])
                return nil
            }
            let (capped, plan, dueAt) = try Self.writeChunk(db, chunk, createdAt: row[4], plan: row[3], from: row[5])
            try db.execute(
                sql: """
                    UPDATE pushes SET resolved_through = COALESCE(?, resolved_through), resolve_until = ?,
                        resolving = ?, pace_next = COALESCE(?, pace_next), plan = COALESCE(?, plan),
                        callback_due = CASE WHEN callback_url IS NULL THEN NULL ELSE COALESCE(?, callback_due) END
                    WHERE id = ?
                    """,
                arguments: [
                    chunk.through.isEmpty ? nil : chunk.through, leaseUntil, !chunk.last, chunk.paceNext, plan, dueAt,
                    chunk.pushId,
                ])
            return capped
        }
    }

    /// Caps and writes a chunk's devices, their outcomes and deliveries (positions from `from` on); returns the
    /// devices capped, the push's plan (`stored`, JSON) merged with what the chunk holds, and when its callback is
    /// due.
    static func writeChunk(_ db: Database, _ chunk: ResolvedChunk, createdAt: Double, plan stored: String?, from: Int)
        throws -> (capped: Set<String>, plan: String?, dueAt: Double?)
    {
        let capped =
            try chunk.cap.map { try Self.capped(db, deliveries: chunk.deliveries, createdAt: createdAt, cap: $0) } ?? []
        let kept = capped.isEmpty ? chunk.deliveries : chunk.deliveries.filter { !capped.contains($0.deviceId) }
        try Self.insertChunk(
            db, pushId: chunk.pushId, deviceIds: chunk.deviceIds,
            outcomes: chunk.outcomes
                + capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") },
            deliveries: kept, from: from)
        // The plan counts what the chunk held and when it is sent, for the devices not capped.
        var plan = try stored.map { try PushPlan(stored: JSONValue.decode(Data($0.utf8))) }
        plan = plan?.merged(held: chunk.held, sendTimes: kept.map { $0.scheduledAt ?? createdAt })
        let dueAt = plan.flatMap { push in push.lastSendAt.map { max(createdAt, $0) } }
        return (capped, plan.map { String(decoding: $0.stored.encodedData(), as: UTF8.self) }, dueAt)
    }

    public func markCancelled(pushId: String, at: Double) async throws -> Bool {
        try await database.pool.write { db in
            try db.execute(
                sql: "UPDATE pushes SET cancelled_at = COALESCE(cancelled_at, ?), resolving = 0 WHERE id = ?",
                arguments: [at, pushId])
            return db.changesCount == 1
        }
    }

    public func sweepCancelled(at: Double, limit: Int) async throws -> Int {
        try await database.pool.write { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    UPDATE deliveries SET state = 'cancelled', finished_at = ?, error = 'cancelled before it was sent'
                    WHERE id IN (
                        SELECT d.id FROM pushes p INDEXED BY pushes_cancelled
                        JOIN deliveries d INDEXED BY deliveries_push ON d.push_id = p.id AND d.state = 'pending'
                        WHERE p.cancelled_at IS NOT NULL AND d.lease_owner IS NULL LIMIT ?)
                    RETURNING push_id, environment
                    """, arguments: [at, limit])
            var moved: [String: [String: Int]] = [:]
            for row in rows {
                let pushId: String = row[0]
                moved[pushId, default: [:]][DeliveryState.pending.rawValue, default: 0] -= 1
                moved[pushId, default: [:]][DeliveryState.cancelled.rawValue, default: 0] += 1
                if (row[1] as String?) == APNsEnvironmentName.fcm.rawValue {
                    moved[pushId, default: [:]][PushCounts.androidKey(.pending), default: 0] -= 1
                    moved[pushId, default: [:]][PushCounts.androidKey(.cancelled), default: 0] += 1
                }
            }
            for (pushId, counts) in moved { try Self.bump(db, pushId: pushId, counts) }
            return rows.count
        }
    }

    public func claimedBefore(pushId: String, at: Double, lease: Double) async throws -> Int {
        try await database.pool.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT count(*) FROM deliveries INDEXED BY deliveries_push
                    WHERE push_id = ? AND state = 'pending' AND lease_owner IS NOT NULL AND lease_until <= ?
                    """, arguments: [pushId, at + lease]) ?? 0
        }
    }

    public func retain(before: Double, limit: Int) async throws -> Int {
        try await database.pool.write { db in
            // The oldest push that is done: nothing pending, nothing resolving, no callback still to post.
            guard
                let pushId = try String.fetchOne(
                    db,
                    sql: """
                        SELECT id FROM pushes p INDEXED BY pushes_by_created
                        WHERE created_at < ? AND resolving = 0 AND callback_due IS NULL
                          AND COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'pending'), 0) = 0
                        ORDER BY created_at LIMIT 1
                        """, arguments: [before])
            else { return 0 }
            var left = limit
            try db.execute(
                sql: "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE push_id = ? LIMIT ?)",
                arguments: [pushId, left])
            left -= db.changesCount
            for table in ["push_devices", "receipts"] where left > 0 {
                try db.execute(
                    sql: """
                        DELETE FROM \(table) WHERE push_id = ? AND device_id IN (
                            SELECT device_id FROM \(table) WHERE push_id = ? LIMIT ?)
                        """, arguments: [pushId, pushId, left])
                left -= db.changesCount
            }
            if left > 0 {
                // Everything of it is gone: its counts and the push itself.
                try db.execute(sql: "DELETE FROM push_counts WHERE push_id = ?", arguments: [pushId])
                try db.execute(sql: "DELETE FROM pushes WHERE id = ?", arguments: [pushId])
                left -= 1
            }
            return limit - left
        }
    }

    public func deleteDevice(_ deviceId: String) async throws -> Int {
        try await database.pool.write { db in
            var moved: [String: [String: Int]] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT push_id, state, environment = 'fcm', count(*) FROM deliveries WHERE device_id = ?
                    GROUP BY push_id, state, environment = 'fcm'
                    """, arguments: [deviceId])
            {
                moved[row[0], default: [:]][row[1], default: 0] -= row[3] as Int
                if row[2] as Bool, let state = DeliveryState(rawValue: row[1]) {
                    moved[row[0], default: [:]][PushCounts.androidKey(state), default: 0] -= row[3] as Int
                }
            }
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT push_id, COALESCE(rule, 'unknown'),
                        EXISTS (SELECT 1 FROM deliveries d WHERE d.push_id = pd.push_id AND d.device_id = pd.device_id)
                    FROM push_devices pd WHERE device_id = ?
                    """, arguments: [deviceId])
            {
                moved[row[0], default: [:]]["matched", default: 0] -= 1
                if !(row[2] as Bool) { moved[row[0], default: [:]]["rule:" + (row[1] as String), default: 0] -= 1 }
            }
            for pushId in try String.fetchAll(
                db, sql: "SELECT push_id FROM receipts WHERE device_id = ?", arguments: [deviceId])
            {
                moved[pushId, default: [:]]["confirmed", default: 0] -= 1
            }
            var removed = 0
            for table in ["deliveries", "push_devices", "receipts"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE device_id = ?", arguments: [deviceId])
                removed += db.changesCount
            }
            for (pushId, counts) in moved { try Self.bump(db, pushId: pushId, counts) }
            return removed
        }
    }
}
