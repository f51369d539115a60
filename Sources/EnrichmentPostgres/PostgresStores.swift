public import EnrichmentCore
import Essentials
import Foundation
import Logging
import PostgresNIO

/// Location fixes in PostgreSQL; the last fix is found through the (device_id, fix_time) primary key.
public struct PostgresFixStore: FixStore {
    let database: PostgresBackend

    public init(database: PostgresBackend) { self.database = database }

    public func insert(_ fixes: [LocationFix]) async throws {
        _ = try await insertReportingPrior(fixes)
    }

    /// The insert's own statement reads each device's newest fix before its first of the batch (a data-modifying
    /// `WITH` runs on the statement's snapshot, so the read sees the table as it was before the batch): no extra
    /// trip to the database, one index probe per device.
    public func insertReportingPrior(_ fixes: [LocationFix]) async throws -> PriorFixes? {
        guard !fixes.isEmpty else { return PriorFixes() }
        // A batch may repeat a (device, fix time): the later one wins, as a second upsert would.
        struct Key: Hashable {
            var device: String
            var time: Double
        }
        var last: [Key: Int] = [:]
        last.reserveCapacity(fixes.count)
        for (index, fix) in fixes.enumerated() { last[Key(device: fix.deviceId, time: fix.fixTime)] = index }
        let fixes = last.count == fixes.count ? fixes : last.values.sorted().map { fixes[$0] }
        // One statement for the whole batch: the columns as arrays, unnested into rows (NULLs kept).
        let devices = fixes.map(\.deviceId)
        let times = fixes.map(\.fixTime)
        let latitudes = fixes.map(\.coordinate.latitude)
        let longitudes = fixes.map(\.coordinate.longitude)
        // No accuracy travels as NaN (never a valid one) and becomes NULL: numbers, not text to format and parse.
        let accuracies = fixes.map { $0.horizontalAccuracy ?? .nan }
        let contexts = fixes.map { $0.context ?? "" }
        let hasContext = fixes.map { $0.context != nil }
        let received = fixes.map(\.receivedAt)
        let extras = fixes.map { $0.extras.map { String(decoding: JSONWriter.bytes($0), as: UTF8.self) } ?? "" }
        let cells = fixes.map {
            LastFixCells.cell(latitude: $0.coordinate.latitude, longitude: $0.coordinate.longitude)
        }
        // The fixes, and each device's newest of the batch into last_fixes (the audiences' index), in one
        // statement; a fix older than the device's last one leaves it in place. Rows written (and locked) in
        // (device, time) order, so two batches over the same devices cannot deadlock.
        let rows = try await database.query(
            """
            WITH u AS (
                SELECT * FROM unnest(\(devices)::text[], \(times)::float8[], \(latitudes)::float8[],
                                     \(longitudes)::float8[], \(accuracies)::float8[], \(contexts)::text[],
                                     \(hasContext)::bool[], \(received)::float8[], \(extras)::text[], \(cells)::int8[])
                     AS u(d, t, la, lo, a, c, hc, r, x, cell)
            ), written AS (
                INSERT INTO fixes (device_id, fix_time, latitude, longitude, horizontal_accuracy, context, received_at,
                                   extras)
                SELECT d, t, la, lo, NULLIF(a, 'NaN'::float8), CASE WHEN hc THEN c END, r, NULLIF(x, '') FROM u
                ORDER BY d, t
                ON CONFLICT (device_id, fix_time) DO UPDATE SET
                    latitude = excluded.latitude, longitude = excluded.longitude,
                    horizontal_accuracy = excluded.horizontal_accuracy, context = excluded.context,
                    received_at = excluded.received_at, extras = excluded.extras
                -- The same fix sent again (an upload retried) is not written again: it keeps its first arrival.
                WHERE (fixes.latitude, fixes.longitude, fixes.horizontal_accuracy, fixes.context, fixes.extras)
                      IS DISTINCT FROM
                      (excluded.latitude, excluded.longitude, excluded.horizontal_accuracy, excluded.context,
                       excluded.extras)
            ), latest AS (
                INSERT INTO last_fixes (device_id, fix_time, latitude, longitude, horizontal_accuracy, cell)
                SELECT DISTINCT ON (d) d, t, la, lo, NULLIF(a, 'NaN'::float8), cell FROM u ORDER BY d, t DESC
                ON CONFLICT (device_id) DO UPDATE SET
                    fix_time = excluded.fix_time, latitude = excluded.latitude, longitude = excluded.longitude,
                    horizontal_accuracy = excluded.horizontal_accuracy, cell = excluded.cell
                WHERE excluded.fix_time >= last_fixes.fix_time
                  AND (last_fixes.fix_time, last_fixes.latitude, last_fixes.longitude, last_fixes.horizontal_accuracy)
                      IS DISTINCT FROM
                      (excluded.fix_time, excluded.latitude, excluded.longitude, excluded.horizontal_accuracy)
            )
            SELECT f.d, p.fix_time, p.latitude, p.longitude, p.horizontal_accuracy, p.context, p.received_at, p.extras
            FROM (SELECT d, min(t) AS t FROM u GROUP BY d) AS f
            LEFT JOIN LATERAL (
                SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras FROM fixes
                WHERE device_id = f.d AND fix_time < f.t ORDER BY fix_time DESC LIMIT 1
            ) AS p ON true
            """)
        var prior: [String: LocationFix?] = [:]
        for try await (id, time, lat, lng, accuracy, context, received, extras) in rows.decode(
            (String, Double?, Double?, Double?, Double?, String?, Double?, String?).self)
        {
            guard let time, let lat, let lng, let received else {
                prior[id] = .some(nil)
                continue
            }
            prior[id] = Self.fix(
                id: id, time: time, latitude: lat, longitude: lng, accuracy: accuracy, context: context,
                received: received, extras: extras)
        }
        return PriorFixes(prior)
    }

    /// Where each device of the given cells was at its last fix, fresh and fine enough (audiences), in one query
    /// answered packed (`PackedRows`). Each range is read through the cell index (`LATERAL ... OFFSET 0`, which the
    /// planner cannot flatten): on a table not analysed yet, the filters on age and accuracy made it scan the
    /// whole table instead (100 ms at a million devices for an empty answer).
    public func lastPositions(
        inCells ranges: [ClosedRange<Int64>], fixedSince oldest: Double, accuracyAtMost maxAccuracy: Double
    ) async throws -> [DevicePosition] {
        guard !ranges.isEmpty else { return [] }
        let lows = ranges.map(\.lowerBound)
        let highs = ranges.map(\.upperBound)
        let rows = try await database.bulkRead(
            """
            SELECT string_agg(l.device_id, E'\\n'), string_agg(float8send(l.latitude) || float8send(l.longitude), ''::bytea)
            FROM unnest(\(lows)::int8[], \(highs)::int8[]) AS r(lo, hi)
            CROSS JOIN LATERAL (
                SELECT device_id, fix_time, latitude, longitude, horizontal_accuracy FROM last_fixes
                WHERE cell BETWEEN r.lo AND r.hi OFFSET 0
            ) AS l
            WHERE l.fix_time >= \(oldest) AND coalesce(l.horizontal_accuracy, 0) <= \(maxAccuracy)
            """)
        var found: [DevicePosition] = []
        try await PackedRows.forEach(rows, doubles: 2) { id, values in
            found.append(
                DevicePosition(
                    deviceId: String(id), coordinate: Coordinate(latitude: values[0], longitude: values[1])))
        }
        return found
    }

    public func latestFix(deviceId: String) async throws -> LocationFix? {
        try await latestFixes(deviceIds: [deviceId])[deviceId]
    }

    public func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix] {
        let ids = Array(Set(deviceIds))
        guard !ids.isEmpty else { return [:] }
        // One backward probe of the primary key per device, whatever its history holds.
        let rows = try await database.query(
            """
            SELECT u.id, f.fix_time, f.latitude, f.longitude, f.horizontal_accuracy, f.context, f.received_at, f.extras
            FROM unnest(\(ids)::text[]) AS u(id)
            CROSS JOIN LATERAL (
                SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras FROM fixes
                WHERE device_id = u.id ORDER BY fix_time DESC LIMIT 1) AS f
            """)
        var found: [String: LocationFix] = [:]
        for fix in try await Self.decode(rows) { found[fix.deviceId] = fix }
        return found
    }

    public func fix(deviceId: String, before: Double) async throws -> LocationFix? {
        let rows = try await database.query(
            """
            SELECT device_id, fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
            FROM fixes WHERE device_id = \(deviceId) AND fix_time < \(before) ORDER BY fix_time DESC LIMIT 1
            """)
        return try await Self.decode(rows).first
    }

    public func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
        let rows = try await database.query(
            """
            SELECT device_id, fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras
            FROM fixes WHERE device_id = \(deviceId) AND fix_time > \(after) AND fix_time < \(before)
            ORDER BY fix_time LIMIT \(limit)
            """)
        return try await Self.decode(rows)
    }

    static func decode(_ rows: some AsyncSequence<PostgresRow, any Error>) async throws -> [LocationFix] {
        var fixes: [LocationFix] = []
        for try await (id, time, lat, lng, accuracy, context, received, extras) in rows.decode(
            (String, Double, Double, Double, Double?, String?, Double, String?).self)
        {
            fixes.append(
                fix(
                    id: id, time: time, latitude: lat, longitude: lng, accuracy: accuracy, context: context,
                    received: received, extras: extras))
        }
        return fixes
    }

    /// A fix from its columns.
    static func fix(
        id: String, time: Double, latitude: Double, longitude: Double, accuracy: Double?, context: String?,
        received: Double, extras: String?
    ) -> LocationFix {
        LocationFix(
            deviceId: id, coordinate: Coordinate(latitude: latitude, longitude: longitude), fixTime: time,
            horizontalAccuracy: accuracy, context: context, receivedAt: received,
            extras: extras.flatMap { try? JSONValue.decode(Data($0.utf8)) })
    }

    public func expireFixes(takenAtOrBefore cutoff: Double) async throws -> Int {
        let rows = try await database.query(
            """
            WITH last AS (DELETE FROM last_fixes WHERE fix_time <= \(cutoff)),
                 gone AS (DELETE FROM fixes WHERE fix_time <= \(cutoff) RETURNING 1)
            SELECT count(*) FROM gone
            """)
        return try await rows.decode(Int.self).first { _ in true } ?? 0
    }

    public func deleteDevice(_ deviceId: String) async throws -> Int {
        try await database.withConnection { connection in
            let rows = try await connection.run(
                """
                WITH last AS (DELETE FROM last_fixes WHERE device_id = \(deviceId)),
                     gone AS (DELETE FROM fixes WHERE device_id = \(deviceId) RETURNING 1)
                SELECT count(*) FROM gone
                """,
                logger: database.logger)
            return try await rows.decode(Int.self).first { _ in true } ?? 0
        }
    }
}
