public import Delivery
import PostgresNIO

/// A push's completion callback (due, claimed, recorded, reported) and its delivery receipts, in PostgreSQL.
extension PostgresOutbox {
    public func callbacksDue(now: Double, limit: Int) async throws -> [PushCallbackDue] {
        let rows = try await database.query(
            """
            SELECT id, callback_url, callback_attempts FROM pushes p
            WHERE callback_due <= \(now) AND NOT resolving
              AND COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'pending'), 0) = 0
            ORDER BY callback_due LIMIT \(limit)
            """)
        var due: [PushCallbackDue] = []
        for try await (id, url, attempts) in rows.decode((String, String, Int).self) {
            due.append(PushCallbackDue(pushId: id, url: url, attempts: attempts))
        }
        return due
    }

    public func claimCallback(pushId: String, now: Double, until: Double) async throws -> Bool {
        let rows = try await database.query(
            """
            UPDATE pushes SET callback_due = \(until) WHERE id = \(pushId) AND callback_due <= \(now)
            RETURNING id
            """)
        return try await rows.decode(String.self).first { _ in true } != nil
    }

    public func recordCallback(pushId: String, at: Double, outcome: String, retryAt: Double?) async throws {
        _ = try await database.query(
            """
            UPDATE pushes SET callback_due = \(retryAt), callback_attempts = callback_attempts + 1,
                callback_outcome = \(outcome), callback_at = \(at)
            WHERE id = \(pushId)
            """)
    }

    public func callbackStatus(pushId: String) async throws -> PushCallbackStatus? {
        let rows = try await database.query(
            """
            SELECT callback_url, callback_attempts, callback_outcome, callback_at, callback_due
            FROM pushes WHERE id = \(pushId) AND callback_url IS NOT NULL
            """)
        guard
            let (url, attempts, outcome, at, due) = try await rows.decode(
                (String, Int, String?, Double?, Double?).self
            ).first(where: { _ in true })
        else { return nil }
        return PushCallbackStatus(url: url, attempts: attempts, outcome: outcome, lastAttemptAt: at, nextAttemptAt: due)
    }

    public func confirm(pushId: String, deviceId: String, at: Double) async throws -> ReceiptOutcome {
        let rows = try await database.query(
            """
            WITH sent AS (
                SELECT 1 FROM deliveries WHERE push_id = \(pushId) AND device_id = \(deviceId)
                  AND state IN ('delivered', 'pending') LIMIT 1),
            made AS (
                INSERT INTO receipts (push_id, device_id, received_at)
                SELECT \(pushId), \(deviceId), \(at) WHERE EXISTS (SELECT 1 FROM sent)
                ON CONFLICT DO NOTHING RETURNING 1)
            , counted AS (
                INSERT INTO push_counts (push_id, key, n) SELECT \(pushId), 'confirmed', 1 WHERE EXISTS (SELECT 1 FROM made)
                ON CONFLICT (push_id, key) DO UPDATE SET n = push_counts.n + 1 RETURNING 1)
            SELECT (SELECT count(*) FROM sent)::int8, (SELECT count(*) FROM made)::int8, (SELECT count(*) FROM counted)::int8
            """)
        guard let (sent, made, _) = try await rows.decode((Int, Int, Int).self).first(where: { _ in true }), sent > 0
        else {
            return .notSent
        }
        return made > 0 ? .recorded : .already
    }

    public func confirmedCount(pushId: String) async throws -> Int {
        try await database.query(
            "SELECT n FROM push_counts WHERE push_id = \(pushId) AND key = 'confirmed'"
        ).decode(Int.self).first { _ in true } ?? 0
    }
}
