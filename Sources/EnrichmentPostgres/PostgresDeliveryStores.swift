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
        let rows = try await database.query(
            "WITH gone AS (DELETE FROM apns_tokens WHERE device_id = \(deviceId) RETURNING 1) SELECT count(*) FROM gone"
        )
        return try await rows.decode(Int.self).first { _ in true } ?? 0
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
        let payload = String(decoding: push.payload.encodedData(), as: UTF8.self)
        let known = Dictionary(outcomes.map { ($0.deviceId, $0) }, uniquingKeysWith: { first, _ in first })
        try await database.withTransaction { connection in
            try await connection.run(
                """
                INSERT INTO pushes (id, created_at, payload, push_type, priority, expiration, collapse_id, topic,
                    enrich, mode)
                VALUES (\(push.id), \(push.createdAt), \(payload), \(push.pushType.rawValue),
                        \(push.priority?.rawValue), \(push.expiration?.epochSeconds), \(push.collapseId), \(push.topic), \(push.enrich), \(push.mode?.rawValue))
                """, logger: database.logger)
            let ids = push.deviceIds
            try await connection.run(
                """
                INSERT INTO push_devices (push_id, position, device_id, outcome, rule)
                SELECT \(push.id), p - 1, d, NULLIF(o, ''), NULLIF(r, '')
                FROM unnest(\(ids)::text[], \(ids.map { known[$0]?.outcome ?? "" })::text[],
                            \(ids.map { known[$0]?.rule ?? "" })::text[]) WITH ORDINALITY AS u(d, o, r, p)
                """, logger: database.logger)
            guard !deliveries.isEmpty else { return }
            try await connection.run(
                """
                INSERT INTO deliveries (push_id, device_id, token, topic, environment, apns_id, next_attempt_at)
                SELECT \(push.id), d, t, tp, e, a, \(push.createdAt)
                FROM unnest(\(deliveries.map(\.deviceId))::text[], \(deliveries.map(\.token))::text[],
                            \(deliveries.map(\.topic))::text[], \(deliveries.map(\.environment.rawValue))::text[],
                            \(deliveries.map(\.apnsId))::text[]) WITH ORDINALITY AS u(d, t, tp, e, a, n)
                ORDER BY n
                """, logger: database.logger)
            // Every node's idle lanes wake at commit and claim their share.
            try await PostgresChangeFeed.notify(.deliveries, on: connection, logger: database.logger)
        }
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
            RETURNING id, push_id, device_id, token, topic, environment, apns_id, attempts
            """)
        var claimed: [ClaimedDelivery] = []
        for try await (id, push, device, token, topic, environment, apnsId, attempts) in rows.decode(
            (Int64, String, String, String, String, String, String, Int).self)
        {
            claimed.append(
                ClaimedDelivery(
                    id: id, pushId: push,
                    delivery: NewDelivery(
                        deviceId: device, token: token, topic: topic,
                        environment: APNsEnvironmentName(rawValue: environment) ?? .production, apnsId: apnsId),
                    attempts: attempts))
        }
        return claimed.sorted { $0.id < $1.id }
    }

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
                        status = CASE WHEN u.hs THEN u.status END, reason = CASE WHEN u.hr THEN u.reason END,
                        apns_timestamp = CASE WHEN u.ht THEN u.ts END, error = CASE WHEN u.he THEN u.error END,
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
            SELECT id, created_at, payload, push_type, priority, expiration, collapse_id, topic, enrich, mode
            FROM pushes WHERE id = \(id)
            """)
        guard
            let (pushId, created, payload, pushType, priority, expiration, collapseId, topic, enrich, mode) =
                try await rows.decode(
                    (String, Double, String, String, Int?, Int64?, String?, String?, Bool, String?).self
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
            mode: mode.flatMap(BodyMode.init(rawValue:)), deviceIds: devices)
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
        for try await (device, token, environment, state, status, reason, apnsId, timestamp, attempts, error, takenOver)
            in try await database.query(
                """
                SELECT device_id, token, environment, state, status, reason, apns_id, apns_timestamp, attempts, error,
                       taken_over
                FROM deliveries WHERE push_id = \(pushId) ORDER BY id
                """
            ).decode((String, String, String, String, Int?, String?, String, Int64?, Int, String?, Bool).self)
        {
            deliveries.append(
                DeliveryReport(
                    deviceId: device, token: token,
                    environment: APNsEnvironmentName(rawValue: environment) ?? .production,
                    state: DeliveryState(rawValue: state) ?? .pending, status: status, reason: reason, apnsId: apnsId,
                    apnsTimestamp: timestamp, attempts: attempts, error: error, resentAfterTakeover: takenOver))
        }
        return PushReport(push: push, devices: devices, deliveries: deliveries)
    }

    public func counts(pushId: String) async throws -> [DeliveryState: Int]? {
        let exists = try await database.query("SELECT 1 FROM pushes WHERE id = \(pushId)").decode(Int.self)
            .first { _ in true }
        guard exists != nil else { return nil }
        var counts = Dictionary(uniqueKeysWithValues: DeliveryState.allCases.map { ($0, 0) })
        for try await (state, count) in try await database.query(
            "SELECT state, count(*) FROM deliveries WHERE push_id = \(pushId) GROUP BY state"
        ).decode((String, Int).self) {
            if let state = DeliveryState(rawValue: state) { counts[state] = count }
        }
        return counts
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
