import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import GRDB

/// What the outbox tells about pushes: a push's counts (O(1)), its deliveries page by page, the app's pushes.
extension SQLiteOutbox {
    public func report(pushId: String) async throws -> PushReport? {
        try await database.pool.read { db in
            guard var push = try Self.push(db, id: pushId) else { return nil }
            // Up to 1,000 devices and their deliveries (the service lists a push's results up to that size):
            // through SQLite's C interface (`RawStatement`).
            let devicesRead = RawStatement(
                try db.cachedStatement(
                    sql: "SELECT device_id, outcome, rule FROM push_devices WHERE push_id = ? ORDER BY position"),
                in: db)
            try devicesRead.bind(1, pushId)
            var devices: [(deviceId: String, outcome: String?, rule: String?)] = []
            try devicesRead.forEachRow { row in devices.append((row.string(0) ?? "", row.string(1), row.string(2))) }
            let deliveriesRead = RawStatement(
                try db.cachedStatement(
                    sql: """
                        SELECT device_id, token, environment, state, status, reason, apns_id, apns_timestamp, attempts,
                            error, taken_over, scheduled_at, id, outcome, rule
                        FROM deliveries WHERE push_id = ? ORDER BY id
                        """), in: db)
            try deliveriesRead.bind(1, pushId)
            var deliveries: [ListedDelivery] = []
            deliveries.reserveCapacity(devices.count)
            try deliveriesRead.forEachRow { row in deliveries.append(Self.listed(row)) }
            push.deviceIds = devices.map(\.deviceId)
            return PushReport(push: push, devices: devices, listed: deliveries)
        }
    }

    /// A delivery from the columns `report` and `deliveries` read, in that order.
    static func listed(_ row: RawStatement.Columns) -> ListedDelivery {
        ListedDelivery(
            id: row.int64(12) ?? 0,
            report: DeliveryReport(
                deviceId: row.string(0) ?? "", token: row.string(1) ?? "",
                environment: row.string(2).flatMap(APNsEnvironmentName.init(rawValue:)) ?? .production,
                state: row.string(3).flatMap(DeliveryState.init(rawValue:)) ?? .pending, status: row.int(4),
                reason: row.string(5), apnsId: row.string(6) ?? "", apnsTimestamp: row.int64(7),
                attempts: row.int(8) ?? 0, error: row.string(9), resentAfterTakeover: row.bool(10),
                scheduledAt: row.double(11)),
            outcome: row.string(13), rule: row.string(14))
    }

    public func status(pushId: String, now: Double) async throws -> PushStatus? {
        try await database.pool.read { db in try Self.status(db, pushId: pushId, now: now) }
    }

    static func status(_ db: Database, pushId: String, now: Double) throws -> PushStatus? {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT \(pushColumns), resolving, cancelled_at, pace_next, audience IS NULL
                    FROM pushes WHERE id = ?
                    """, arguments: [pushId])
        else { return nil }
        let push = try push(row)
        var stored: [String: Int] = [:]
        for count in try Row.fetchAll(db, sql: "SELECT key, n FROM push_counts WHERE push_id = ?", arguments: [pushId])
        {
            stored[count[0]] = count[1]
        }
        var deliveries: [DeliveryState: Int] = [:]
        for state in DeliveryState.allCases { deliveries[state] = stored[state.rawValue] ?? 0 }
        // Devices with several deliveries are read and counted once each; the rest are their deliveries' counts.
        var solo = deliveries
        var shared: [String: [DeliveryState]] = [:]
        for pair in try Row.fetchAll(
            db,
            sql:
                "SELECT device_id, state FROM deliveries INDEXED BY deliveries_shared WHERE push_id = ? AND shared = 1",
            arguments: [pushId])
        {
            let state = (pair[1] as String?).flatMap(DeliveryState.init(rawValue:)) ?? .pending
            shared[pair[0], default: []].append(state)
            solo[state, default: 0] -= 1
        }
        let pending = deliveries[.pending] ?? 0
        let resolving: Bool = row[15]
        let rate: Double? = row[14]
        // Sends ahead (a scheduled or paced push): counted from the push's pending deliveries due later.
        var scheduled = 0
        if pending > 0, (push.plan?.lastSendAt ?? 0) > now || rate != nil {
            scheduled =
                try Int.fetchOne(
                    db,
                    sql: """
                        SELECT count(*) FROM deliveries INDEXED BY deliveries_push
                        WHERE push_id = ? AND state = 'pending' AND next_attempt_at > ?
                        """, arguments: [pushId, now]) ?? 0
        }
        var counts = PushCounts(
            deliveries: deliveries, matched: stored["matched"] ?? 0,
            notSent: stored.reduce(into: [:]) { found, entry in
                if entry.key.hasPrefix("rule:") { found[String(entry.key.dropFirst(5))] = entry.value }
            },
            devices: PushCounts.devices(solo: solo, shared: Array(shared.values)), scheduled: scheduled,
            confirmed: stored["confirmed"] ?? 0)
        counts.androidDeliveries = PushCounts.android(stored)
        let paceNext: Double? = row[17]
        return PushStatus(
            push: push, counts: counts, resolving: resolving, open: resolving && row[18] as Bool,
            cancelledAt: row[16],
            endsAt: resolving ? nil : paceNext.map { next in next - 1 / max(rate ?? 1, 1e-9) })
    }

    public func deliveries(pushId: String, state: DeliveryState?, after: Int64, limit: Int) async throws
        -> [ListedDelivery]
    {
        try await database.pool.read { db in
            // Through the range of ids the push's deliveries hold (they were written together, chunk by chunk):
            // a page reads from the cursor on, not every delivery before it (`+`: not through the push's index,
            // which would read all of them to sort them by id).
            guard
                let range = try Row.fetchOne(
                    db, sql: "SELECT first_delivery, last_delivery FROM pushes WHERE id = ?", arguments: [pushId]),
                let first = range[0] as Int64?, let last = range[1] as Int64?
            else { return [] }
            let read = RawStatement(
                try db.cachedStatement(
                    sql: """
                        SELECT device_id, token, environment, state, status, reason, apns_id, apns_timestamp, attempts,
                            error, taken_over, scheduled_at, id, outcome, rule
                        FROM deliveries
                        WHERE id > ? AND id <= ? AND +push_id = ? AND (? IS NULL OR +state = ?)
                        ORDER BY id LIMIT ?
                        """), in: db)
            try read.bind(1, max(after, first - 1))
            try read.bind(2, last)
            try read.bind(3, pushId)
            try read.bind(4, state?.rawValue)
            try read.bind(5, state?.rawValue)
            try read.bind(6, limit)
            var found: [ListedDelivery] = []
            try read.forEachRow { row in found.append(Self.listed(row)) }
            return found
        }
    }

    public func waiting(pushId: String, limit: Int) async throws -> [DeliveryReport] {
        // The push's pending deliveries due last first (a retry or a wait for APNs is due later than a first
        // attempt), at most `limit` of them: the answer stays bounded at a million.
        try await database.pool.read { db in
            let read = RawStatement(
                try db.cachedStatement(
                    sql: """
                        SELECT device_id, token, environment, state, status, reason, apns_id, apns_timestamp, attempts,
                            error, taken_over, scheduled_at, id, outcome, rule
                        FROM deliveries INDEXED BY deliveries_push
                        WHERE push_id = ? AND state = 'pending'
                        ORDER BY next_attempt_at DESC LIMIT ?
                        """), in: db)
            try read.bind(1, pushId)
            try read.bind(2, limit)
            var found: [DeliveryReport] = []
            try read.forEachRow { row in
                let delivery = Self.listed(row).report
                if delivery.status != nil || delivery.reason != nil || delivery.error != nil { found.append(delivery) }
            }
            return found
        }
    }

    public func pendingCount(pushId: String) async throws -> Int {
        try await database.pool.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT COALESCE((SELECT n FROM push_counts WHERE push_id = ? AND key = 'pending'), 0)
                        + COALESCE((SELECT resolving FROM pushes WHERE id = ?), 0)
                    """, arguments: [pushId, pushId]) ?? 0
        }
    }

    public func pushes(app: String, active: Bool, after: String?, limit: Int, now: Double) async throws
        -> [PushStatus]
    {
        try await database.pool.read { db in
            var cursor: (Double, String) = (.infinity, "")
            if let after {
                // An unknown cursor (a push deleted since) ends the list, as it does on PostgreSQL.
                guard
                    let at = try Double.fetchOne(
                        db, sql: "SELECT created_at FROM pushes WHERE id = ?", arguments: [after])
                else { return [] }
                cursor = (at, after)
            }
            // Newest first through the app's index; a push still under way has deliveries pending or is resolving.
            let ids = try String.fetchAll(
                db,
                sql: """
                    SELECT id FROM pushes p
                    WHERE app = ? AND (created_at < ? OR (created_at = ? AND id < ?))
                      AND (NOT ? OR resolving = 1
                           OR COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'pending'), 0) > 0)
                    ORDER BY created_at DESC, id DESC LIMIT ?
                    """,
                arguments: [app, cursor.0, cursor.0, after == nil ? "\u{10FFFF}" : cursor.1, active, limit])
            return try ids.compactMap { try Self.status(db, pushId: $0, now: now) }
        }
    }

    public func nextSendAt(pushId: String) async throws -> Double? {
        try await database.pool.read { db in
            try Double.fetchOne(
                db,
                sql: """
                    SELECT min(next_attempt_at) FROM deliveries INDEXED BY deliveries_push
                    WHERE push_id = ? AND state = 'pending'
                    """, arguments: [pushId])
        }
    }
}
