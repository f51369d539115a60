import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import PostgresNIO

/// Device token registrations in PostgreSQL, keyed by (device id, token).
public struct PostgresTokenStore: DeviceTokenStore {
    let database: PostgresBackend

    public init(database: PostgresBackend) { self.database = database }

    static let columns =
        "device_id, token, topic, environment, registered_at, active, invalidated_at, reason"

    static func registrations(_ rows: some AsyncSequence<PostgresRow, any Error>) async throws -> [TokenRegistration] {
        var found: [TokenRegistration] = []
        for try await (device, token, topic, environment, registered, active, invalidated, reason) in rows.decode(
            (String, String, String, String, Double, Bool, Double?, String?).self)
        {
            found.append(
                TokenRegistration(
                    deviceId: device, token: token, topic: topic,
                    environment: APNsEnvironmentName(rawValue: environment) ?? .production, registeredAt: registered,
                    active: active, invalidatedAt: invalidated, reason: reason))
        }
        return found
    }

    public func register(_ registration: TokenRegistration) async throws -> Bool {
        // xmax = 0 only for a row this statement inserted (an update sets it): created, or refreshed.
        let rows = try await database.query(
            """
            INSERT INTO apns_tokens (device_id, token, topic, environment, registered_at, active)
            VALUES (\(registration.deviceId), \(registration.token), \(registration.topic),
                    \(registration.environment.rawValue), \(registration.registeredAt), true)
            ON CONFLICT (device_id, token) DO UPDATE SET
                topic = excluded.topic, environment = excluded.environment, registered_at = excluded.registered_at,
                active = true, invalidated_at = NULL, reason = NULL
            RETURNING (xmax = 0)
            """)
        return try await rows.decode(Bool.self).first { _ in true } ?? false
    }

    public func registrations(deviceId: String) async throws -> [TokenRegistration] {
        try await Self.registrations(
            database.query(
                """
                SELECT \(unescaped: Self.columns) FROM apns_tokens WHERE device_id = \(deviceId)
                ORDER BY registered_at, token
                """))
    }

    public func activeRegistrations(deviceIds: [String]) async throws -> [String: [TokenRegistration]] {
        let ids = Array(Set(deviceIds))
        guard !ids.isEmpty else { return [:] }
        let found = try await Self.registrations(
            database.query(
                """
                SELECT \(unescaped: Self.columns) FROM apns_tokens WHERE device_id = ANY(\(ids)::text[]) AND active
                ORDER BY device_id, registered_at, token
                """))
        return Dictionary(grouping: found, by: \.deviceId)
    }

    public func remove(deviceId: String, token: String) async throws -> Bool {
        let rows = try await database.query(
            "DELETE FROM apns_tokens WHERE device_id = \(deviceId) AND token = \(token) RETURNING 1")
        return try await rows.decode(Int.self).first { _ in true } != nil
    }

    public func removeDevice(_ deviceId: String) async throws -> Int {
        try await database.withTransaction { connection in
            let rows = try await connection.run(
                """
                WITH gone AS (DELETE FROM apns_tokens WHERE device_id = \(deviceId) RETURNING 1)
                SELECT count(*) FROM gone
                """, logger: database.logger)
            let removed = try await rows.decode(Int.self).first { _ in true } ?? 0
            try await connection.run(
                "DELETE FROM device_profiles WHERE device_id = \(deviceId)", logger: database.logger)
            try await connection.run("DELETE FROM device_tags WHERE device_id = \(deviceId)", logger: database.logger)
            return removed
        }
    }

    public func setProfiles(_ changes: [ProfileChange], at: Double) async throws {
        // The last entry of a device listed twice, as SQLite's loop leaves it.
        var zones: [String: String?] = [:]
        var tags: [String: [String]] = [:]
        for change in changes {
            if let zone = change.timeZone { zones[change.deviceId] = zone }
            if let set = change.tags { tags[change.deviceId] = set }
        }
        guard !zones.isEmpty || !tags.isEmpty else { return }
        // Rows locked in device order, so that two imports sharing devices cannot deadlock.
        let zoneIds = zones.keys.sorted()
        let zoneNames = zoneIds.map { (zones[$0] ?? nil) ?? "" }  // "" is a cleared zone (no IANA name is empty)
        let tagged = tags.keys.sorted()
        let pairs = tagged.flatMap { id in Set(tags[id] ?? []).sorted().map { (id, $0) } }
        let pairIds = pairs.map(\.0)
        let pairTags = pairs.map(\.1)
        try await database.withTransaction { connection in
            if !zoneIds.isEmpty {
                try await connection.run(
                    """
                    INSERT INTO device_profiles (device_id, time_zone, updated_at)
                    SELECT d, NULLIF(z, ''), \(at) FROM unnest(\(zoneIds)::text[], \(zoneNames)::text[]) AS u(d, z)
                    ON CONFLICT (device_id) DO UPDATE SET time_zone = excluded.time_zone, updated_at = excluded.updated_at
                    """, logger: database.logger)
            }
            if !tagged.isEmpty {
                try await connection.run(
                    "DELETE FROM device_tags WHERE device_id = ANY(\(tagged)::text[])", logger: database.logger)
                try await connection.run(
                    """
                    INSERT INTO device_tags (tag, device_id) SELECT t, d FROM unnest(\(pairTags)::text[], \(pairIds)::text[]) AS u(t, d)
                    ON CONFLICT DO NOTHING
                    """, logger: database.logger)
            }
        }
    }

    public func profiles(deviceIds: [String]) async throws -> [String: DeviceProfile] {
        let ids = Array(Set(deviceIds))
        guard !ids.isEmpty else { return [:] }
        var found: [String: DeviceProfile] = [:]
        for try await (id, zone) in try await database.query(
            "SELECT device_id, time_zone FROM device_profiles WHERE device_id = ANY(\(ids)::text[])"
        ).decode((String, String?).self) where zone != nil {
            found[id, default: DeviceProfile()].timeZone = zone
        }
        for try await (id, tag) in try await database.query(
            "SELECT device_id, tag FROM device_tags WHERE device_id = ANY(\(ids)::text[]) ORDER BY device_id, tag"
        ).decode((String, String).self) {
            found[id, default: DeviceProfile()].tags.append(tag)
        }
        return found
    }

    public func devices(taggedWith tag: String) async throws -> [String] {
        try await devices(taggedWithAll: [tag])
    }

    public func devices(taggedWithAll tags: [String]) async throws -> [String] {
        guard !tags.isEmpty else { return [] }
        // The rarest tag's devices that carry every other (each probed through the (tag, device_id) key), as one
        // text of lines (`PackedRows`): one value to decode, not a row per device (a common tag holds most devices).
        var ordered = tags
        if tags.count > 1 {
            var sizes: [String: Int] = [:]
            let rows = try await database.query(
                "SELECT w.tag, (SELECT count(*) FROM device_tags d WHERE d.tag = w.tag) FROM unnest(\(tags)::text[]) AS w(tag)"
            )
            for try await (tag, size) in rows.decode((String, Int).self) { sizes[tag] = size }
            ordered.sort { sizes[$0, default: 0] < sizes[$1, default: 0] }
        }
        let first = ordered[0]
        let others = Array(ordered.dropFirst())
        let rows = try await database.bulkRead(
            """
            SELECT string_agg(t.device_id, E'\\n') FROM device_tags t
            WHERE t.tag = \(first)
              AND NOT EXISTS (SELECT 1 FROM unnest(\(others)::text[]) AS w(tag)
                              WHERE NOT EXISTS (SELECT 1 FROM device_tags o
                                                WHERE o.tag = w.tag AND o.device_id = t.device_id))
            """)
        return try await PackedRows.lines(rows)
    }

    public func deactivate(_ deactivation: TokenDeactivation) async throws -> TokenRegistration? {
        let rows = try await database.query(
            """
            UPDATE apns_tokens SET active = false, invalidated_at = \(deactivation.invalidatedAt),
                reason = \(deactivation.reason)
            WHERE device_id = \(deactivation.deviceId) AND token = \(deactivation.token) AND active
              AND (\(deactivation.unlessRegisteredAfter)::float8 IS NULL
                   OR registered_at <= \(deactivation.unlessRegisteredAfter)::float8)
              AND (\(deactivation.onlyFor?.topic)::text IS NULL OR topic = \(deactivation.onlyFor?.topic)::text)
              AND (\(deactivation.onlyFor?.environment.rawValue)::text IS NULL
                   OR environment = \(deactivation.onlyFor?.environment.rawValue)::text)
            RETURNING \(unescaped: Self.columns)
            """)
        return try await Self.registrations(rows).first
    }
}

/// The outbox in PostgreSQL. Claims use `FOR UPDATE SKIP LOCKED` with a lease, so several nodes draining one
/// outbox never hand the same delivery out twice, and a dead node's claims are taken over when their lease ends.
public struct PostgresOutbox: OutboxStore {
    let database: PostgresBackend

    public init(database: PostgresBackend) { self.database = database }

    public func enqueue(_ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery]) async throws {
        let logger = database.logger
        try await database.withTransaction { connection in
            try await Self.insert(connection, push, outcomes: outcomes, deliveries: deliveries, logger: logger)
        }
    }

    public func enqueue(
        _ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery], cap: FrequencyCap, app: String,
        plan: @Sendable (Set<String>) -> PushPlan?
    ) async throws -> Set<String> {
        let logger = database.logger
        return try await database.withTransaction { connection in
            // Pushes of one app are capped one at a time, on every node: the count and the insert of one cannot
            // interleave with another's.
            try await connection.run("SELECT pg_advisory_xact_lock(hashtext(\("cap:" + app)))", logger: logger)
            var firsts: [String: Double] = [:]
            for item in deliveries where firsts[item.deviceId] == nil {
                firsts[item.deviceId] = item.scheduledAt ?? push.createdAt
            }
            let devices = Array(firsts.keys)
            let times = devices.map { firsts[$0] ?? push.createdAt }
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
            var push = push
            push.plan = plan(capped)
            try await Self.insert(
                connection, push,
                outcomes: outcomes
                    + capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") },
                deliveries: deliveries.filter { !capped.contains($0.deviceId) }, logger: logger)
            return capped
        }
    }

    static func insert(
        _ connection: PostgresConnection, _ push: PushDefinition, outcomes: [DeviceOutcome],
        deliveries: [NewDelivery], logger: Logger
    ) async throws {
        let payload = String(decoding: push.payload.encodedData(), as: UTF8.self)
        let plan = push.plan.map { String(decoding: $0.stored.encodedData(), as: UTF8.self) }
        let known = Dictionary(outcomes.map { ($0.deviceId, $0) }, uniquingKeysWith: { first, _ in first })
        try await connection.run(
            """
            INSERT INTO pushes (id, created_at, payload, push_type, priority, expiration, collapse_id, topic,
                enrich, mode, plan, callback_url, callback_due, origin)
            VALUES (\(push.id), \(push.createdAt), \(payload), \(push.pushType.rawValue),
                    \(push.priority?.rawValue), \(push.expiration?.epochSeconds), \(push.collapseId), \(push.topic), \(push.enrich), \(push.mode?.rawValue), \(plan),
                    \(push.callbackURL), \(push.callbackDueAt), \(push.origin.stored))
            """, logger: logger)
        let ids = push.deviceIds
        try await connection.run(
            """
            INSERT INTO push_devices (push_id, position, device_id, outcome, rule)
            SELECT \(push.id), p - 1, d, NULLIF(o, ''), NULLIF(r, '')
            FROM unnest(\(ids)::text[], \(ids.map { known[$0]?.outcome ?? "" })::text[],
                        \(ids.map { known[$0]?.rule ?? "" })::text[]) WITH ORDINALITY AS u(d, o, r, p)
            """, logger: logger)
        guard !deliveries.isEmpty else { return }
        // NaN stands for "not scheduled" in the array (a float8[] cannot hold NULL through the binding).
        try await connection.run(
            """
            INSERT INTO deliveries (push_id, device_id, token, topic, environment, apns_id, next_attempt_at,
                scheduled_at)
            SELECT \(push.id), d, t, tp, e, a, CASE WHEN s = 'NaN' THEN \(push.createdAt) ELSE s END,
                   NULLIF(s, 'NaN')
            FROM unnest(\(deliveries.map(\.deviceId))::text[], \(deliveries.map(\.token))::text[],
                        \(deliveries.map(\.topic))::text[], \(deliveries.map(\.environment.rawValue))::text[],
                        \(deliveries.map(\.apnsId))::text[], \(deliveries.map { $0.scheduledAt ?? .nan })::float8[])
                 WITH ORDINALITY AS u(d, t, tp, e, a, s, n)
            ORDER BY n
            """, logger: logger)
        // Every node's idle lanes wake at commit and claim their share.
        try await PostgresChangeFeed.notify(.deliveries, on: connection, logger: logger)
    }

    public func claim(owner: String, limit: Int, now: Double, lease: Double) async throws -> [ClaimedDelivery] {
        let rows = try await database.query(
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
            RETURNING id, push_id, device_id, token, topic, environment, apns_id, attempts, scheduled_at
            """)
        var claimed: [ClaimedDelivery] = []
        for try await (id, push, device, token, topic, environment, apnsId, attempts, scheduledAt) in rows.decode(
            (Int64, String, String, String, String, String, String, Int, Double?).self)
        {
            claimed.append(
                ClaimedDelivery(
                    id: id, pushId: push,
                    delivery: NewDelivery(
                        deviceId: device, token: token, topic: topic,
                        environment: APNsEnvironmentName(rawValue: environment) ?? .production, apnsId: apnsId,
                        scheduledAt: scheduledAt),
                    attempts: attempts))
        }
        return claimed.sorted { $0.id < $1.id }
    }

    /// An update without an answer from APNs (no status) keeps the last answer's status, reason and timestamp.
    public func complete(
        _ updates: [DeliveryUpdate], outcomes: [(pushId: String, outcome: DeviceOutcome)], owner: String
    ) async throws -> Int {
        guard !updates.isEmpty || !outcomes.isEmpty else { return 0 }
        return try await database.withTransaction { connection in
            var written = 0
            if !updates.isEmpty {
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
                    RETURNING d.id
                    """, logger: database.logger)
                for try await _ in rows { written += 1 }
            }
            if !outcomes.isEmpty {
                try await connection.run(
                    """
                    UPDATE push_devices AS p SET outcome = u.outcome, rule = u.rule
                    FROM unnest(\(outcomes.map(\.pushId))::text[], \(outcomes.map(\.outcome.deviceId))::text[],
                                \(outcomes.map(\.outcome.outcome))::text[], \(outcomes.map(\.outcome.rule))::text[])
                         AS u(push_id, device_id, outcome, rule)
                    WHERE p.push_id = u.push_id AND p.device_id = u.device_id
                    """, logger: database.logger)
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
        let rows = try await database.query(
            """
            SELECT id, created_at, payload, push_type, priority, expiration, collapse_id, topic, enrich, mode, plan,
                callback_url, origin
            FROM pushes WHERE id = \(id)
            """)
        guard
            let (
                pushId, created, payload, pushType, priority, expiration, collapseId, topic, enrich, mode, plan,
                callback, origin
            ) =
                try await rows.decode(
                    (
                        String, Double, String, String, Int?, Int64?, String?, String?, Bool, String?, String?, String?,
                        String?
                    ).self
                ).first(where: { _ in true })
        else { return nil }
        var devices: [String] = []
        for try await device in try await database.query(
            "SELECT device_id FROM push_devices WHERE push_id = \(id) ORDER BY position"
        ).decode(String.self) {
            devices.append(device)
        }
        return PushDefinition(
            id: pushId, createdAt: created, payload: try JSONValue.decode(Data(payload.utf8)),
            pushType: try PushType.stored(pushType),
            priority: try APNsPriority.stored(priority), expiration: try APNsExpiration.stored(expiration),
            collapseId: collapseId, topic: topic, enrich: enrich,
            mode: mode.flatMap(BodyMode.init(rawValue:)), deviceIds: devices,
            plan: try plan.map { try PushPlan(stored: JSONValue.decode(Data($0.utf8))) }, callbackURL: callback,
            origin: PushOrigin(stored: origin))
    }

    public func callbacksDue(now: Double, limit: Int) async throws -> [PushCallbackDue] {
        let rows = try await database.query(
            """
            SELECT id, callback_url, callback_attempts FROM pushes p
            WHERE callback_due <= \(now)
              AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.push_id = p.id AND d.state = 'pending')
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

    public func cancel(pushId: String, at: Double) async throws -> Int {
        let rows = try await database.query(
            """
            WITH gone AS (
                UPDATE deliveries SET state = 'cancelled', finished_at = \(at), error = 'cancelled before it was sent'
                WHERE push_id = \(pushId) AND state = 'pending' AND lease_owner IS NULL
                RETURNING 1)
            SELECT count(*) FROM gone
            """)
        return try await rows.decode(Int.self).first { _ in true } ?? 0
    }

    public func scheduled(app: String, limit: Int) async throws -> [(pushId: String, pending: Int, nextAt: Double)] {
        // The app's devices are stored under `<app>/` (`AppNamespace`), the default app's without a prefix.
        let pattern = AppNamespace.prefix(of: app) + "%"
        let isDefault = app == AppNamespace.defaultApp
        var found: [(pushId: String, pending: Int, nextAt: Double)] = []
        for try await (id, pending, next) in try await database.query(
            """
            SELECT push_id, count(*)::int8, min(next_attempt_at) FROM deliveries
            WHERE state = 'pending'
              AND CASE WHEN \(isDefault) THEN strpos(device_id, '/') = 0 ELSE device_id LIKE \(pattern) END
            GROUP BY push_id ORDER BY min(next_attempt_at), push_id LIMIT \(limit)
            """
        ).decode((String, Int, Double).self) {
            found.append((id, pending, next))
        }
        return found
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
            SELECT (SELECT count(*) FROM sent)::int8, (SELECT count(*) FROM made)::int8
            """)
        guard let (sent, made) = try await rows.decode((Int, Int).self).first(where: { _ in true }), sent > 0 else {
            return .notSent
        }
        return made > 0 ? .recorded : .already
    }

    public func confirmedCount(pushId: String) async throws -> Int {
        try await database.query("SELECT count(*)::int8 FROM receipts WHERE push_id = \(pushId)").decode(Int.self)
            .first { _ in true } ?? 0
    }

    public func report(pushId: String) async throws -> PushReport? {
        guard let push = try await push(id: pushId) else { return nil }
        var devices: [(deviceId: String, outcome: String?, rule: String?)] = []
        for try await (device, outcome, rule) in try await database.query(
            "SELECT device_id, outcome, rule FROM push_devices WHERE push_id = \(pushId) ORDER BY position"
        ).decode((String, String?, String?).self) {
            devices.append((device, outcome, rule))
        }
        var deliveries: [DeliveryReport] = []
        for try await (
            device, token, environment, state, status, reason, apnsId, timestamp, attempts, error, takenOver, scheduled
        )
            in try await database.query(
                """
                SELECT device_id, token, environment, state, status, reason, apns_id, apns_timestamp, attempts, error,
                       taken_over, scheduled_at
                FROM deliveries WHERE push_id = \(pushId) ORDER BY id
                """
            ).decode((String, String, String, String, Int?, String?, String, Int64?, Int, String?, Bool, Double?).self)
        {
            deliveries.append(
                DeliveryReport(
                    deviceId: device, token: token,
                    environment: APNsEnvironmentName(rawValue: environment) ?? .production,
                    state: DeliveryState(rawValue: state) ?? .pending, status: status, reason: reason, apnsId: apnsId,
                    apnsTimestamp: timestamp, attempts: attempts, error: error, resentAfterTakeover: takenOver,
                    scheduledAt: scheduled))
        }
        return PushReport(push: push, devices: devices, deliveries: deliveries)
    }

    public func pendingCount(pushId: String) async throws -> Int {
        try await database.query(
            "SELECT count(*) FROM deliveries WHERE push_id = \(pushId) AND state = 'pending'"
        ).decode(Int.self).first { _ in true } ?? 0
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
