import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import PostgresNIO

/// What the outbox tells about pushes: a push's counts (O(1)), its deliveries page by page, the app's pushes.
extension PostgresOutbox {
    static let deliveryColumns = """
        device_id, token, environment, state, status, reason, apns_id, apns_timestamp, attempts, error, taken_over,
        scheduled_at, id, outcome, rule
        """

    /// A delivery from the columns `deliveryColumns` names.
    static func listed(_ row: PostgresRow) throws -> ListedDelivery {
        let (
            device, token, environment, state, status, reason, apnsId, timestamp, attempts, error, takenOver,
            scheduled, id, outcome, rule
        ) = try row.decode(
            (
                String, String, String, String, Int?, String?, String, Int64?, Int, String?, Bool, Double?, Int64,
                String?, String?
            ).self)
        return ListedDelivery(
            id: id,
            report: DeliveryReport(
                deviceId: device, token: token, environment: APNsEnvironmentName(rawValue: environment) ?? .production,
                state: DeliveryState(rawValue: state) ?? .pending, status: status, reason: reason, apnsId: apnsId,
                apnsTimestamp: timestamp, attempts: attempts, error: error, resentAfterTakeover: takenOver,
                scheduledAt: scheduled),
            outcome: outcome, rule: rule)
    }

    public func report(pushId: String) async throws -> PushReport? {
        guard var push = try await push(id: pushId) else { return nil }
        var devices: [(deviceId: String, outcome: String?, rule: String?)] = []
        for try await (device, outcome, rule) in try await database.query(
            "SELECT device_id, outcome, rule FROM push_devices WHERE push_id = \(pushId) ORDER BY position"
        ).decode((String, String?, String?).self) {
            devices.append((device, outcome, rule))
        }
        var deliveries: [ListedDelivery] = []
        for try await row in try await database.query(
            "SELECT \(unescaped: Self.deliveryColumns) FROM deliveries WHERE push_id = \(pushId) ORDER BY id")
        {
            deliveries.append(try Self.listed(row))
        }
        push.deviceIds = devices.map(\.deviceId)
        return PushReport(push: push, devices: devices, listed: deliveries)
    }

    public func status(pushId: String, now: Double) async throws -> PushStatus? {
        let rows = try await database.query(
            """
            SELECT \(unescaped: Self.pushColumns), resolving, cancelled_at, pace_next,
                (SELECT COALESCE(json_object_agg(key, n), '{}')::text FROM push_counts c WHERE c.push_id = p.id),
                (SELECT COALESCE(string_agg(device_id || E'\\t' || state, E'\\n'), '') FROM deliveries d
                 WHERE d.push_id = p.id AND d.shared),
                audience IS NULL
            FROM pushes p WHERE id = \(pushId)
            """)
        var found: (PushDefinition, Bool, Double?, Double?, String, String, Bool)?
        for try await row in rows {
            let columns = try row.decode(
                (
                    String, Double, String, String, Int?, Int64?, String?, String?, Bool, String?, String?, String?,
                    String?, String?, Double?, Bool, Double?, Double?, String, String, Bool
                ).self)
            found = (try Self.push(row), columns.15, columns.16, columns.17, columns.18, columns.19, columns.20)
        }
        guard let (push, resolving, cancelledAt, paceNext, countsText, sharedText, unaddressed) = found else {
            return nil
        }
        var stored: [String: Int] = [:]
        if case .object(let members) = try JSONValue.decode(Data(countsText.utf8)) {
            for (key, value) in members { stored[key] = Int(value.lenientDouble ?? 0) }
        }
        var deliveries: [DeliveryState: Int] = [:]
        for state in DeliveryState.allCases { deliveries[state] = stored[state.rawValue] ?? 0 }
        var solo = deliveries
        var shared: [String: [DeliveryState]] = [:]
        for line in sharedText.split(separator: "\n") {
            let parts = line.split(separator: "\t", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let state = DeliveryState(rawValue: String(parts[1])) ?? .pending
            shared[String(parts[0]), default: []].append(state)
            solo[state, default: 0] -= 1
        }
        var scheduled = 0
        if (deliveries[.pending] ?? 0) > 0, (push.plan?.lastSendAt ?? 0) > now || push.rate != nil {
            scheduled =
                try await database.query(
                    """
                    SELECT count(*)::int8 FROM deliveries
                    WHERE push_id = \(pushId) AND state = 'pending' AND next_attempt_at > \(now)
                    """
                ).decode(Int.self).first { _ in true } ?? 0
        }
        var counts = PushCounts(
            deliveries: deliveries, matched: stored["matched"] ?? 0,
            notSent: stored.reduce(into: [:]) { found, entry in
                if entry.key.hasPrefix("rule:") { found[String(entry.key.dropFirst(5))] = entry.value }
            },
            devices: PushCounts.devices(solo: solo, shared: Array(shared.values)), scheduled: scheduled,
            confirmed: stored["confirmed"] ?? 0)
        counts.androidDeliveries = PushCounts.android(stored)
        return PushStatus(
            push: push, counts: counts, resolving: resolving, open: resolving && unaddressed, cancelledAt: cancelledAt,
            endsAt: resolving ? nil : paceNext.map { next in next - 1 / max(push.rate ?? 1, 1e-9) })
    }

    public func deliveries(pushId: String, state: DeliveryState?, after: Int64, limit: Int) async throws
        -> [ListedDelivery]
    {
        // Through the push's id range (its first to its last delivery), in the primary key's order: the planner
        // took the push's index and sorted every delivery of the push for each page (108 ms at 100,000), so the
        // index's order is asked for.
        let logger = database.logger
        return try await database.withTransaction { connection in
            try await connection.run("SET LOCAL enable_sort = off", logger: logger)
            var found: [ListedDelivery] = []
            for try await row in try await connection.run(
                """
                SELECT \(unescaped: Self.deliveryColumns) FROM deliveries
                WHERE id > GREATEST(\(after), COALESCE((SELECT first_delivery FROM pushes WHERE id = \(pushId)), 1) - 1)
                  AND id <= COALESCE((SELECT last_delivery FROM pushes WHERE id = \(pushId)), 0)
                  AND push_id = \(pushId) AND (\(state?.rawValue)::text IS NULL OR state = \(state?.rawValue)::text)
                ORDER BY id LIMIT \(limit)
                """, logger: logger)
            {
                found.append(try Self.listed(row))
            }
            return found
        }
    }

    public func waiting(pushId: String, limit: Int) async throws -> [DeliveryReport] {
        // Due last first (a retry or a wait for APNs is due later than a first attempt), at most `limit`.
        var found: [DeliveryReport] = []
        for try await row in try await database.query(
            """
            SELECT \(unescaped: Self.deliveryColumns) FROM deliveries
            WHERE push_id = \(pushId) AND state = 'pending'
            ORDER BY next_attempt_at DESC LIMIT \(limit)
            """)
        {
            let delivery = try Self.listed(row).report
            if delivery.status != nil || delivery.reason != nil || delivery.error != nil { found.append(delivery) }
        }
        return found
    }

    public func pendingCount(pushId: String) async throws -> Int {
        try await database.query(
            """
            SELECT (COALESCE((SELECT n FROM push_counts WHERE push_id = \(pushId) AND key = 'pending'), 0)
                + COALESCE((SELECT resolving::int FROM pushes WHERE id = \(pushId)), 0))::int8
            """
        ).decode(Int.self).first { _ in true } ?? 0
    }

    public func pushes(app: String, active: Bool, after: String?, limit: Int, now: Double) async throws
        -> [PushStatus]
    {
        var ids: [String] = []
        for try await id in try await database.query(
            """
            SELECT id FROM pushes p
            WHERE app = \(app)
              AND (\(after)::text IS NULL
                   OR (created_at, id) < (SELECT created_at, id FROM pushes WHERE id = \(after)::text))
              AND (NOT \(active) OR resolving
                   OR COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'pending'), 0) > 0)
            ORDER BY created_at DESC, id DESC LIMIT \(limit)
            """
        ).decode(String.self) {
            ids.append(id)
        }
        var found: [PushStatus] = []
        for id in ids {
            if let status = try await status(pushId: id, now: now) { found.append(status) }
        }
        return found
    }

    public func nextSendAt(pushId: String) async throws -> Double? {
        try await database.query(
            "SELECT min(next_attempt_at) FROM deliveries WHERE push_id = \(pushId) AND state = 'pending'"
        ).decode(Double?.self).first { _ in true } ?? nil
    }
}
