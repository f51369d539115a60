public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import GRDB

/// Open pushes: a push whose devices come in requests, 1,000 at a time, until it is closed. It is stored as a push
/// still resolving without an audience; `resolve_until` is when it closes itself if nothing is added.
extension SQLiteOutbox {
    public func openPush(_ push: PushDefinition, defaultZone: String?, until: Double) async throws {
        try await database.pool.write { db in
            try Self.insertPush(db, push, audience: nil, defaultZone: defaultZone)
            try db.execute(
                sql: "UPDATE pushes SET resolving = 1, resolve_until = ? WHERE id = ?", arguments: [until, push.id])
        }
    }

    public func openClaim(pushId: String) async throws -> ResolutionClaim? {
        try await database.pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT \(Self.pushColumns), default_zone, pace_next,
                            COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'matched'), 0)
                        FROM pushes p
                        WHERE id = ? AND resolving = 1 AND audience IS NULL AND cancelled_at IS NULL
                        """, arguments: [pushId])
            else { return nil }
            return ResolutionClaim(
                push: try Self.push(row), audience: "", through: nil, defaultZone: row[15], matched: row[17],
                paceNext: row[16])
        }
    }

    public func appendChunk(_ chunk: ResolvedChunk, until: Double) async throws -> AppendedChunk? {
        try await database.pool.write { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT plan, created_at,
                            COALESCE((SELECT n FROM push_counts c WHERE c.push_id = p.id AND c.key = 'matched'), 0)
                        FROM pushes p
                        WHERE id = ? AND resolving = 1 AND audience IS NULL AND cancelled_at IS NULL
                        """, arguments: [chunk.pushId])
            else { return nil }
            // A device already in the push (an earlier request, or this one retried) is left out.
            let member = try db.cachedStatement(sql: "SELECT 1 FROM push_devices WHERE push_id = ? AND device_id = ?")
            var already = Set<String>()
            for id in chunk.deviceIds where try Int.fetchOne(member, arguments: [chunk.pushId, id]) != nil {
                already.insert(id)
            }
            let fresh = already.isEmpty ? chunk : chunk.leavingOut(already)
            let (capped, plan, dueAt) = try Self.writeChunk(db, fresh, createdAt: row[1], plan: row[0], from: row[2])
            try db.execute(
                sql: """
                    UPDATE pushes SET resolve_until = ?, resolving = ?, pace_next = COALESCE(?, pace_next),
                        plan = COALESCE(?, plan),
                        callback_due = CASE WHEN callback_url IS NULL THEN NULL ELSE COALESCE(?, callback_due) END
                    WHERE id = ?
                    """,
                arguments: [
                    until, !chunk.last, fresh.paceNext, plan, dueAt, chunk.pushId,
                ])
            return AppendedChunk(capped: capped, already: already)
        }
    }

    public func closePush(pushId: String) async throws -> Bool {
        try await database.pool.write { db in
            try db.execute(
                sql: "UPDATE pushes SET resolving = 0 WHERE id = ? AND resolving = 1 AND audience IS NULL",
                arguments: [pushId])
            return db.changesCount > 0
        }
    }

    public func closeIdle(now: Double) async throws -> [String] {
        try await database.pool.write { db in
            try String.fetchAll(
                db,
                sql: """
                    UPDATE pushes SET resolving = 0
                    WHERE id IN (
                        SELECT id FROM pushes INDEXED BY pushes_resolving
                        WHERE resolving = 1 AND resolve_until < ? AND audience IS NULL)
                    RETURNING id
                    """, arguments: [now])
        }
    }
}
