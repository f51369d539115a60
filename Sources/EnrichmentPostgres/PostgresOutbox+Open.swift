public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import PostgresNIO

/// Open pushes: a push whose devices come in requests, 1,000 at a time, until it is closed. It is stored as a push
/// still resolving without an audience; `resolve_until` is when it closes itself if nothing is added.
extension PostgresOutbox {
    public func openPush(_ push: PushDefinition, defaultZone: String?, until: Double) async throws {
        let logger = database.logger
        try await database.withTransaction { connection in
            try await Self.insertPush(connection, push, audience: nil, defaultZone: defaultZone, logger: logger)
            try await connection.run(
                "UPDATE pushes SET resolving = true, resolve_until = \(until) WHERE id = \(push.id)", logger: logger)
        }
    }

    public func openClaim(pushId: String) async throws -> ResolutionClaim? {
        let rows = try await database.query(
            """
            SELECT \(unescaped: Self.pushColumns), default_zone, pace_next,
                COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'matched'), 0)
            FROM pushes p
            WHERE id = \(pushId) AND resolving AND audience IS NULL AND cancelled_at IS NULL
            """)
        for try await row in rows {
            let columns = try row.decode(
                (
                    String, Double, String, String, Int?, Int64?, String?, String?, Bool, String?, String?, String?,
                    String?, String?, Double?, String?, Double?, Int64
                ).self)
            return ResolutionClaim(
                push: try Self.push(row), audience: "", through: nil, defaultZone: columns.15,
                matched: Int(columns.17), paceNext: columns.16)
        }
        return nil
    }

    public func appendChunk(_ chunk: ResolvedChunk, until: Double) async throws -> AppendedChunk? {
        let logger = database.logger
        return try await database.withTransaction { connection -> AppendedChunk? in
            // The push's row, locked: two requests adding to one push (on any node) take turns, so a device
            // named in both is added once.
            let rows = try await connection.run(
                """
                SELECT plan, created_at,
                    COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'matched'), 0)
                FROM pushes p
                WHERE id = \(chunk.pushId) AND resolving AND audience IS NULL AND cancelled_at IS NULL
                FOR UPDATE
                """, logger: logger)
            guard
                let (planText, createdAt, matched) = try await rows.decode((String?, Double, Int64).self).first(
                    where: { _ in true })
            else { return nil }
            var already = Set<String>()
            if !chunk.deviceIds.isEmpty {
                let present = try await connection.run(
                    """
                    SELECT device_id FROM push_devices
                    WHERE push_id = \(chunk.pushId) AND device_id = ANY(\(chunk.deviceIds))
                    """, logger: logger)
                for try await id in present.decode(String.self) { already.insert(id) }
            }
            let fresh = already.isEmpty ? chunk : chunk.leavingOut(already)
            let (capped, planStored, dueAt) = try await Self.writeChunk(
                connection, fresh, createdAt: createdAt, plan: planText, from: Int(matched), logger: logger)
            try await connection.run(
                """
                UPDATE pushes SET resolve_until = \(until), resolving = \(!chunk.last),
                    pace_next = COALESCE(\(fresh.paceNext), pace_next), plan = COALESCE(\(planStored), plan),
                    callback_due = CASE WHEN callback_url IS NULL THEN NULL ELSE COALESCE(\(dueAt), callback_due) END
                WHERE id = \(chunk.pushId)
                """, logger: logger)
            return AppendedChunk(capped: capped, already: already)
        }
    }

    public func closePush(pushId: String) async throws -> Bool {
        let rows = try await database.query(
            """
            UPDATE pushes SET resolving = false WHERE id = \(pushId) AND resolving AND audience IS NULL RETURNING 1
            """)
        return try await rows.decode(Int.self).first { _ in true } != nil
    }

    public func closeIdle(now: Double) async throws -> [String] {
        let rows = try await database.query(
            """
            UPDATE pushes SET resolving = false
            WHERE resolving AND audience IS NULL AND resolve_until < \(now)
            RETURNING id
            """)
        var closed: [String] = []
        for try await id in rows.decode(String.self) { closed.append(id) }
        return closed
    }
}
