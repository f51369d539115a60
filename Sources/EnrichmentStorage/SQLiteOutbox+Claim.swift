import APNsCore
public import Delivery
import Foundation
import GRDB
import Synchronization

extension SQLiteOutbox {
    /// Claims up to `limit` due deliveries for `owner`, in the due order (`next_attempt_at`, then id).
    ///
    /// The due index holds every pending delivery, the ones already claimed and on the wire among them, and those
    /// come first in the due order: a claim from the start of the index steps over every delivery in flight (a row
    /// read each, to see its lease) before it finds one to take. So a claim starts where the last full one
    /// stopped (`ClaimCursor`). What lies behind that point is in flight, or was released or let go since (a
    /// failure's release, an expired lease): the cursor goes back to the start after a release, after a claim
    /// that found less than `limit`, and once a second, so such a delivery waits a second at most. The lease
    /// conditions are checked on every row as before: the cursor only chooses where to look.
    public func claim(owner: String, limit: Int, now: Double, lease: Double) async throws -> [ClaimedDelivery] {
        try await database.pool.write { db in
            // Read inside the write: claims are one at a time, each after the one before it.
            let from = cursor.start()
            let statement = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET lease_owner = ?1, lease_until = ?2,
                        attempts = attempts + (lease_owner IS NOT NULL),
                        taken_over = taken_over OR lease_owner IS NOT NULL
                    WHERE id IN (
                        SELECT id FROM (
                            SELECT id, next_attempt_at FROM deliveries INDEXED BY deliveries_due
                            WHERE state = 'pending' AND next_attempt_at = ?3 AND id > ?4
                                AND (lease_until IS NULL OR lease_until < ?5)
                            UNION ALL
                            SELECT id, next_attempt_at FROM deliveries INDEXED BY deliveries_due
                            WHERE state = 'pending' AND next_attempt_at > ?3 AND next_attempt_at <= ?5
                                AND (lease_until IS NULL OR lease_until < ?5)
                            ORDER BY next_attempt_at, id LIMIT ?6))
                    RETURNING id, push_id, device_id, token, topic, environment, apns_id, attempts, scheduled_at,
                        next_attempt_at
                    """)
            // From the cursor: the rest of its instant (a seek on both columns), then every later one up to now;
            // from the start, the first part is empty. (A row value `(next_attempt_at, id) > (?, ?)` seeks on the
            // first column only: it would step over the deliveries in flight all the same.)
            try statement.setArguments([
                owner, now + lease, from?.due ?? -Double.greatestFiniteMagnitude, from?.id ?? Int64.min, now, limit,
            ])
            var claimed: [ClaimedDelivery] = []
            claimed.reserveCapacity(limit)
            var last: (due: Double, id: Int64)?
            try RawStatement(statement, in: db).forEachRow { row in
                let id = row.int64(0) ?? 0
                let due = row.double(9) ?? 0
                if last.map({ ($0.due, $0.id) < (due, id) }) ?? true { last = (due, id) }
                claimed.append(
                    ClaimedDelivery(
                        id: id, pushId: row.string(1) ?? "",
                        delivery: NewDelivery(
                            deviceId: row.string(2) ?? "", token: row.string(3) ?? "", topic: row.string(4) ?? "",
                            environment: row.string(5).flatMap(APNsEnvironmentName.init(rawValue:)) ?? .production,
                            apnsId: row.string(6) ?? "", scheduledAt: row.double(8)),
                        attempts: row.int(7) ?? 0, cancelled: false))
            }
            // Whether each push is cancelled, read once per push of the batch (nearly always one).
            let cancelled = try db.cachedStatement(sql: "SELECT cancelled_at IS NOT NULL FROM pushes WHERE id = ?")
            var pushes: [String: Bool] = [:]
            for index in claimed.indices {
                let pushId = claimed[index].pushId
                if pushes[pushId] == nil { pushes[pushId] = try Bool.fetchOne(cancelled, arguments: [pushId]) ?? false }
                claimed[index].cancelled = pushes[pushId] ?? false
            }
            cursor.claimed(claimed.count == limit ? last : nil)
            return claimed.sorted { $0.id < $1.id }
        }
    }
}

/// Where the last full claim of this process stopped in the due order, and when it last looked from the start.
final class ClaimCursor: Sendable {
    private struct State {
        var position: (due: Double, id: Int64)?
        var lookedFromStart = ContinuousClock.now
    }

    /// How long a claim may go on from the cursor before one looks from the start again.
    static let restartEvery = Duration.seconds(1)

    private let state = Mutex(State())

    /// Where the next claim starts: nil for the start of the due order.
    func start() -> (due: Double, id: Int64)? {
        state.withLock { state in
            if state.position == nil || ContinuousClock.now - state.lookedFromStart >= Self.restartEvery {
                state.position = nil
                state.lookedFromStart = .now
            }
            return state.position
        }
    }

    /// After a claim: the last delivery it took, when it took a full batch (more may follow it); nil to look from
    /// the start next time.
    func claimed(_ last: (due: Double, id: Int64)?) {
        state.withLock { $0.position = last }
    }

    func reset() {
        state.withLock { $0.position = nil }
    }
}
