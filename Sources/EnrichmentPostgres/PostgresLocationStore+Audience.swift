public import EnrichmentCore
import PostgresNIO

/// The audiences' history (`AudienceHistory`): zone centres and visits found by grid cell, read packed.
extension PostgresLocationStore: AudienceHistory {
    // Each cell range is read through the cell index (`LATERAL ... OFFSET 0`, which the planner cannot flatten
    // into a join it might answer by scanning the table, as it did for last fixes on a table not analysed yet).
    public func zoneCentres(inCells ranges: [ClosedRange<Int64>]) async throws -> [ZoneCentre] {
        guard !ranges.isEmpty else { return [] }
        // Packed (`PackedRows`): each line the device id, then a tab and the period when it has one.
        let rows = try await database.bulkRead(
            """
            SELECT string_agg(z.device_id || coalesce(E'\\t' || z.period, ''), E'\\n'),
                   string_agg(float8send(z.latitude) || float8send(z.longitude), ''::bytea)
            FROM unnest(\(ranges.map(\.lowerBound))::int8[], \(ranges.map(\.upperBound))::int8[]) AS r(lo, hi)
            CROSS JOIN LATERAL (
                SELECT device_id, period, latitude, longitude FROM zois WHERE cell BETWEEN r.lo AND r.hi OFFSET 0
            ) AS z
            """)
        var found: [ZoneCentre] = []
        try await PackedRows.forEach(rows, doubles: 2) { line, values in
            let tab = line.utf8.firstIndex(of: UInt8(ascii: "\t"))
            found.append(
                ZoneCentre(
                    deviceId: String(line[..<(tab ?? line.endIndex)]),
                    period: tab.map { String(line[line.utf8.index(after: $0)...]) },
                    coordinate: Coordinate(latitude: values[0], longitude: values[1])))
        }
        return found
    }

    public func visitPlaces(inCells ranges: [ClosedRange<Int64>], from: Double, to: Double) async throws
        -> [VisitPlace]
    {
        guard !ranges.isEmpty else { return [] }
        let rows = try await database.bulkRead(
            """
            SELECT string_agg(v.device_id, E'\\n'),
                   string_agg(float8send(v.latitude) || float8send(v.longitude) || float8send(v.arrival)
                              || float8send(v.departure), ''::bytea)
            FROM unnest(\(ranges.map(\.lowerBound))::int8[], \(ranges.map(\.upperBound))::int8[]) AS r(lo, hi)
            CROSS JOIN LATERAL (
                SELECT device_id, latitude, longitude, arrival, departure FROM visits
                WHERE cell BETWEEN r.lo AND r.hi OFFSET 0
            ) AS v
            WHERE v.departure >= \(from) AND v.arrival <= \(to)
            """)
        var found: [VisitPlace] = []
        try await PackedRows.forEach(rows, doubles: 4) { id, values in
            found.append(
                VisitPlace(
                    deviceId: String(id), coordinate: Coordinate(latitude: values[0], longitude: values[1]),
                    arrival: values[2], departure: values[3]))
        }
        return found
    }
}
