import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import PostgresNIO

/// The outbox in PostgreSQL. Claims use `FOR UPDATE SKIP LOCKED` with a lease, so several nodes draining one
/// outbox never hand the same delivery out twice, and a dead node's claims are taken over when their lease ends.
public struct PostgresOutbox: OutboxStore {
    let database: PostgresBackend

    public init(database: PostgresBackend) { self.database = database }

    public func enqueue(_ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery]) async throws {
        let logger = database.logger
        try await database.withTransaction { connection in
            try await Self.insertPush(connection, push, audience: nil, defaultZone: nil, logger: logger)
            try await Self.insertChunk(
                connection, pushId: push.id, createdAt: push.createdAt, deviceIds: push.deviceIds, outcomes: outcomes,
                deliveries: deliveries, from: 0, logger: logger)
        }
    }

    public func enqueue(
        _ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery], cap: FrequencyCap, app: String,
        plan: @Sendable (Set<String>) -> PushPlan?
    ) async throws -> Set<String> {
        let logger = database.logger
        return try await database.withTransaction { connection in
            let capped = try await Self.capped(
                connection, deliveries: deliveries, createdAt: push.createdAt, cap: cap, app: app, logger: logger)
            var push = push
            push.plan = plan(capped)
            try await Self.insertPush(connection, push, audience: nil, defaultZone: nil, logger: logger)
            try await Self.insertChunk(
                connection, pushId: push.id, createdAt: push.createdAt, deviceIds: push.deviceIds,
                outcomes: outcomes
                    + capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") },
                deliveries: deliveries.filter { !capped.contains($0.deviceId) }, from: 0, logger: logger)
            return capped
        }
    }

    /// The devices of `deliveries` that already have `cap.max` pushes a person sees within the cap's window of
    /// their send time. Pushes of one app are capped one at a time, on every node (a lock held to the commit): the
    /// count and the insert of one cannot interleave with another's.
    static func capped(
        _ connection: PostgresConnection, deliveries: [NewDelivery], createdAt: Double, cap: FrequencyCap,
        app: String, logger: Logger
    ) async throws -> Set<String> {
        try await connection.run("SELECT pg_advisory_xact_lock(hashtext(\("cap:" + app)))", logger: logger)
        var firsts: [String: Double] = [:]
        for item in deliveries where firsts[item.deviceId] == nil {
            firsts[item.deviceId] = item.scheduledAt ?? createdAt
        }
        let devices = Array(firsts.keys)
        let times = devices.map { firsts[$0] ?? createdAt }
        let rows = try await connection.run(
            """
            SELECT u.d FROM unnest(\(devices)::text[], \(times)::float8[]) AS u(d, t)
            WHERE (SELECT count(DISTINCT x.push_id) FROM deliveries x JOIN pushes p ON p.id = x.push_id
                   WHERE x.device_id = u.d AND p.push_type NOT IN ('liveactivity', 'background')
                    AND p.origin IS NULL AND (
                    (x.state = 'pending' AND x.next_attempt_at > u.t - \(cap.window)
                        AND x.next_attempt_at < u.t + \(cap.window))
                    OR (x.state = 'delivered' AND x.finished_at > u.t - \(cap.window)
                        AND x.finished_at < u.t + \(cap.window)))) >= \(cap.max)
            """, logger: logger)
        var capped = Set<String>()
        for try await device in rows.decode(String.self) { capped.insert(device) }
        return capped
    }

    /// Writes the push's row; `audience` (JSON) makes it a push still resolving.
    static func insertPush(
        _ connection: PostgresConnection, _ push: PushDefinition, audience: String?, defaultZone: String?,
        logger: Logger
    ) async throws {
        let payload = String(decoding: push.payload.encodedData(), as: UTF8.self)
        let plan = push.plan.map { String(decoding: $0.stored.encodedData(), as: UTF8.self) }
        try await connection.run(
            """
            INSERT INTO pushes (id, created_at, payload, push_type, priority, expiration, collapse_id, topic,
                enrich, mode, plan, callback_url, callback_due, origin, app, audience, resolving, default_zone, rate)
            VALUES (\(push.id), \(push.createdAt), \(payload), \(push.pushType.rawValue),
                    \(push.priority?.rawValue), \(push.expiration?.epochSeconds), \(push.collapseId), \(push.topic),
                    \(push.enrich), \(push.mode?.rawValue), \(plan), \(push.callbackURL), \(push.callbackDueAt),
                    \(push.origin.stored), \(push.app), \(audience), \(audience != nil), \(defaultZone), \(push.rate))
            """, logger: logger)
    }

    /// Writes devices of a push (positions from `from` on) with their outcomes, and their deliveries, and adds
    /// them to the push's counts.
    static func insertChunk(
        _ connection: PostgresConnection, pushId: String, createdAt: Double, deviceIds: [String],
        outcomes: [DeviceOutcome], deliveries: [NewDelivery], from: Int, logger: Logger
    ) async throws {
        let known = Dictionary(outcomes.map { ($0.deviceId, $0) }, uniquingKeysWith: { first, _ in first })
        let ids = deviceIds
        if !ids.isEmpty {
            try await connection.run(
                """
                INSERT INTO push_devices (push_id, position, device_id, outcome, rule)
                SELECT \(pushId), \(from) + p - 1, d, NULLIF(o, ''), NULLIF(r, '')
                FROM unnest(\(ids)::text[], \(ids.map { known[$0]?.outcome ?? "" })::text[],
                            \(ids.map { known[$0]?.rule ?? "" })::text[]) WITH ORDINALITY AS u(d, o, r, p)
                """, logger: logger)
        }
        var perDevice: [String: Int] = [:]
        for item in deliveries { perDevice[item.deviceId, default: 0] += 1 }
        var counts: [String: Int] = ["matched": ids.count]
        for id in ids where perDevice[id] == nil { counts["rule:" + (known[id]?.rule ?? "unknown"), default: 0] += 1 }
        if !deliveries.isEmpty {
            counts[DeliveryState.pending.rawValue] = deliveries.count
            // Android's share, kept beside the totals (the report's per-platform counts; iOS is the rest).
            let android = deliveries.reduce(0) { $0 + ($1.environment == .fcm ? 1 : 0) }
            if android > 0 { counts[PushCounts.androidKey(.pending)] = android }
            // NaN stands for "not scheduled" in the array (a float8[] cannot hold NULL through the binding).
            let range = try await connection.run(
                """
                WITH made AS (
                    INSERT INTO deliveries (push_id, device_id, token, topic, environment, apns_id, next_attempt_at,
                        scheduled_at, shared)
                    SELECT \(pushId), d, t, tp, e, a, CASE WHEN s = 'NaN' THEN \(createdAt) ELSE s END,
                           NULLIF(s, 'NaN'), sh
                    FROM unnest(\(deliveries.map(\.deviceId))::text[], \(deliveries.map(\.token))::text[],
                                \(deliveries.map(\.topic))::text[], \(deliveries.map(\.environment.rawValue))::text[],
                                \(deliveries.map(\.apnsId))::text[], \(deliveries.map { $0.scheduledAt ?? .nan })::float8[],
                                \(deliveries.map { (perDevice[$0.deviceId] ?? 0) > 1 })::bool[])
                         WITH ORDINALITY AS u(d, t, tp, e, a, s, sh, n)
                    ORDER BY n
                    RETURNING id)
                SELECT min(id), max(id) FROM made
                """, logger: logger)
            if let (first, last) = try await range.decode((Int64, Int64).self).first(where: { _ in true }) {
                // The push's deliveries are the ids from its first to its last (pages are read through that range).
                // A paced push: when the delivery after its last may be due (its `ends_at`).
                let latest = deliveries.compactMap(\.scheduledAt).max()
                try await connection.run(
                    """
                    UPDATE pushes SET first_delivery = COALESCE(first_delivery, \(first)),
                        last_delivery = GREATEST(last_delivery, \(last)),
                        pace_next = CASE WHEN rate IS NULL OR \(latest)::float8 IS NULL THEN pace_next
                                         ELSE GREATEST(COALESCE(pace_next, 0), \(latest)::float8 + 1.0 / rate) END
                    WHERE id = \(pushId)
                    """, logger: logger)
            }
        }
        try await bump(connection, pushId: pushId, counts, logger: logger)
        // Every node's idle lanes wake at commit and claim their share.
        if !deliveries.isEmpty { try await PostgresChangeFeed.notify(.deliveries, on: connection, logger: logger) }
    }

    /// Adds to the push's counts (a negative number takes away).
    static func bump(_ connection: PostgresConnection, pushId: String, _ counts: [String: Int], logger: Logger)
        async throws
    {
        let entries = counts.filter { $0.value != 0 }.sorted { $0.key < $1.key }
        guard !entries.isEmpty else { return }
        try await connection.run(
            """
            INSERT INTO push_counts (push_id, key, n)
            SELECT \(pushId), k, n FROM unnest(\(entries.map(\.key))::text[], \(entries.map { Int64($0.value) })::int8[])
                AS u(k, n)
            ON CONFLICT (push_id, key) DO UPDATE SET n = push_counts.n + excluded.n
            """, logger: logger)
    }

    public func claim(owner: String, limit: Int, now: Double, lease: Double) async throws -> [ClaimedDelivery] {
        try await database.withTransaction { connection in
            try await connection.planThroughKeys(logger: database.logger)
            return try await Self.claim(
                connection, owner: owner, limit: limit, now: now, lease: lease, logger: database.logger)
        }
    }

    static func claim(
        _ connection: PostgresConnection, owner: String, limit: Int, now: Double, lease: Double, logger: Logger
    ) async throws -> [ClaimedDelivery] {
        let rows = try await connection.run(
            """
            UPDATE deliveries SET lease_owner = \(owner), lease_until = \(now + lease),
                -- An expired lease: the node that held it stopped, perhaps after sending it.
                attempts = attempts + (lease_owner IS NOT NULL)::int,
                taken_over = taken_over OR lease_owner IS NOT NULL
            WHERE id IN (
                SELECT id FROM deliveries
                WHERE state = 'pending' AND next_attempt_at <= \(now)
                  AND (lease_until IS NULL OR lease_until < \(now))
                ORDER BY next_attempt_at, id LIMIT \(limit)
                FOR UPDATE SKIP LOCKED)
            RETURNING id, push_id, device_id, token, topic, environment, apns_id, attempts, scheduled_at,
                (SELECT p.cancelled_at IS NOT NULL FROM pushes p WHERE p.id = deliveries.push_id)
            """, logger: logger)
        var claimed: [ClaimedDelivery] = []
        for try await (id, push, device, token, topic, environment, apnsId, attempts, scheduledAt, cancelled)
            in rows.decode((Int64, String, String, String, String, String, String, Int, Double?, Bool).self)
        {
            claimed.append(
                ClaimedDelivery(
                    id: id, pushId: push,
                    delivery: NewDelivery(
                        deviceId: device, token: token, topic: topic,
                        environment: APNsEnvironmentName(rawValue: environment) ?? .production, apnsId: apnsId,
                        scheduledAt: scheduledAt),
                    attempts: attempts, cancelled: cancelled))
        }
        return claimed.sorted { $0.id < $1.id }
    }

    /// An update without an answer from APNs (no status) keeps the last answer's status, reason and timestamp.
    public func complete(_ updates: [DeliveryUpdate], owner: String) async throws -> Int {
        guard !updates.isEmpty else { return 0 }
        return try await database.withTransaction { connection in
            try await connection.planThroughKeys(logger: database.logger)
            var written = 0
            let text = { (values: [String?]) in values.map { $0 ?? "" } }
            let present = { (values: [String?]) in values.map { $0 != nil } }
            let rows = try await connection.run(
                """
                UPDATE deliveries AS d SET state = u.state, attempts = u.attempts,
                    next_attempt_at = COALESCE(CASE WHEN u.hn THEN u.next END, d.next_attempt_at),
                    status = CASE WHEN u.hs THEN u.status ELSE d.status END,
                    reason = CASE WHEN u.hs THEN (CASE WHEN u.hr THEN u.reason END) ELSE d.reason END,
                    apns_timestamp = CASE WHEN u.hs THEN (CASE WHEN u.ht THEN u.ts END) ELSE d.apns_timestamp END,
                    error = CASE WHEN u.he THEN u.error END,
                    outcome = COALESCE(CASE WHEN u.ho THEN u.outcome END, d.outcome),
                    rule = COALESCE(CASE WHEN u.hru THEN u.rule END, d.rule),
                    finished_at = CASE WHEN u.hf THEN u.finished END, lease_owner = NULL, lease_until = NULL
                FROM unnest(\(updates.map(\.id))::int8[], \(updates.map(\.state.rawValue))::text[],
                            \(updates.map(\.attempts))::int4[],
                            \(updates.map { $0.nextAttemptAt ?? 0 })::float8[],
                            \(updates.map { $0.nextAttemptAt != nil })::bool[],
                            \(updates.map { $0.status ?? 0 })::int4[], \(updates.map { $0.status != nil })::bool[],
                            \(text(updates.map(\.reason)))::text[], \(present(updates.map(\.reason)))::bool[],
                            \(updates.map { $0.apnsTimestamp ?? 0 })::int8[],
                            \(updates.map { $0.apnsTimestamp != nil })::bool[],
                            \(text(updates.map(\.error)))::text[], \(present(updates.map(\.error)))::bool[],
                            \(text(updates.map(\.outcome)))::text[], \(present(updates.map(\.outcome)))::bool[],
                            \(text(updates.map(\.rule)))::text[], \(present(updates.map(\.rule)))::bool[],
                            \(updates.map { $0.finishedAt ?? 0 })::float8[],
                            \(updates.map { $0.finishedAt != nil })::bool[])
                     AS u(id, state, attempts, next, hn, status, hs, reason, hr, ts, ht, error, he, outcome, ho,
                          rule, hru, finished, hf)
                WHERE d.id = u.id AND d.lease_owner = \(owner) AND d.state = 'pending'
                RETURNING d.push_id, d.state, d.environment
                """, logger: database.logger)
            // Each written delivery that leaves `pending` moves one count of its push.
            var moved: [String: [String: Int]] = [:]
            for try await (pushId, state, environment) in rows.decode((String, String, String).self) {
                written += 1
                guard state != DeliveryState.pending.rawValue, let final = DeliveryState(rawValue: state) else {
                    continue
                }
                moved[pushId, default: [:]][DeliveryState.pending.rawValue, default: 0] -= 1
                moved[pushId, default: [:]][state, default: 0] += 1
                if environment == APNsEnvironmentName.fcm.rawValue {
                    moved[pushId, default: [:]][PushCounts.androidKey(.pending), default: 0] -= 1
                    moved[pushId, default: [:]][PushCounts.androidKey(final), default: 0] += 1
                }
            }
            // In push order, so that two nodes' transactions take the counts' rows in the same order.
            for pushId in moved.keys.sorted() {
                try await Self.bump(connection, pushId: pushId, moved[pushId] ?? [:], logger: database.logger)
            }
            return written
        }
    }

    public func releaseClaims(owner: String?) async throws -> Int {
        let rows = try await database.query(
            """
            WITH released AS (
                UPDATE deliveries SET lease_owner = NULL, lease_until = NULL
                WHERE lease_owner IS NOT NULL AND (\(owner)::text IS NULL OR lease_owner = \(owner)::text)
                RETURNING 1)
            SELECT count(*) FROM released
            """)
        return try await rows.decode(Int.self).first { _ in true } ?? 0
    }

    public func push(id: String) async throws -> PushDefinition? {
        let rows = try await database.query("SELECT \(unescaped: Self.pushColumns) FROM pushes WHERE id = \(id)")
        for try await row in rows { return try Self.push(row) }
        return nil
    }

    static let pushColumns = """
        id, created_at, payload, push_type, priority, expiration, collapse_id, topic, enrich, mode, plan,
        callback_url, origin, app, rate
        """

    /// A push read back from a row whose first columns are `pushColumns`, in that order (its devices not listed).
    static func push(_ row: PostgresRow) throws -> PushDefinition {
        let (
            pushId, created, payload, pushType, priority, expiration, collapseId, topic, enrich, mode, plan,
            callback, origin, app, rate
        ) = try row.decode(
            (
                String, Double, String, String, Int?, Int64?, String?, String?, Bool, String?, String?, String?,
                String?, String?, Double?
            ).self)
        return PushDefinition(
            id: pushId, createdAt: created, payload: try JSONValue.decode(Data(payload.utf8)),
            pushType: try PushType.stored(pushType),
            priority: try APNsPriority.stored(priority), expiration: try APNsExpiration.stored(expiration),
            collapseId: collapseId, topic: topic, enrich: enrich,
            mode: mode.flatMap(BodyMode.init(rawValue:)), deviceIds: [],
            plan: try plan.map { try PushPlan(stored: JSONValue.decode(Data($0.utf8))) }, callbackURL: callback,
            origin: PushOrigin(stored: origin), app: app ?? AppNamespace.defaultApp, rate: rate)
    }

    public func depth() async throws -> Int {
        try await database.query("SELECT count(*) FROM deliveries WHERE state = 'pending'").decode(Int.self)
            .first { _ in true } ?? 0
    }

    public func nextDue() async throws -> Double? {
        try await database.query(
            """
            SELECT min(t) FROM (
                SELECT min(next_attempt_at) AS t FROM deliveries WHERE state = 'pending' AND lease_owner IS NULL
                UNION ALL
                SELECT min(GREATEST(next_attempt_at, lease_until)) FROM deliveries
                WHERE state = 'pending' AND lease_owner IS NOT NULL) AS due
            """
        ).decode(Double?.self).first { _ in true } ?? nil
    }
}
