public import EnrichmentCore
import Essentials
import Foundation
import GRDB

/// POIs in SQLite with an R*Tree over their coordinates, upserted by store id.
public struct SQLitePOIStore: POIStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    public func upsert(_ pois: [POI]) async throws -> Int {
        guard !pois.isEmpty else { return 0 }
        let now = Date().timeIntervalSince1970
        return try await database.pool.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO pois (store_id, name, latitude, longitude, address_lines, city, zipcode, country_code,
                                      types, tags, contact, user_properties, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (store_id) DO UPDATE SET
                        name = excluded.name, latitude = excluded.latitude, longitude = excluded.longitude,
                        address_lines = excluded.address_lines, city = excluded.city, zipcode = excluded.zipcode,
                        country_code = excluded.country_code, types = excluded.types, tags = excluded.tags,
                        contact = excluded.contact, user_properties = excluded.user_properties,
                        updated_at = excluded.updated_at
                    """)
            for poi in pois {
                try statement.execute(arguments: [
                    poi.storeId, poi.name, poi.coordinate.latitude, poi.coordinate.longitude,
                    Self.json(poi.address.lines), poi.address.city, poi.address.zipcode, poi.address.countryCode,
                    Self.json(poi.types), Self.json(poi.tags),
                    poi.contact.map(Self.json), poi.userProperties.map(Self.json), now,
                ])
            }
            return pois.count
        }
    }

    public func all() async throws -> [POI] {
        try await database.pool.read { db in
            try Row.fetchAll(db, sql: "\(Self.columns) FROM pois ORDER BY id").map(Self.poi)
        }
    }

    public func count() async throws -> Int {
        try await database.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pois") ?? 0 }
    }

    /// Exact nearest-k through the R*Tree: search a box that surely holds every POI within r, widen until k found.
    ///
    /// The R*Tree only selects candidates; ranking is by haversine metres, then store id, as everywhere else.
    public func nearest(to point: Coordinate, query: PlacesQuery) async throws -> [PlaceMatch] {
        guard query.limit > 0 else { return [] }
        return try await database.pool.read { db in
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pois") ?? 0
            let maxRadius = min(query.radius ?? .infinity, Double.pi * Coordinate.earthRadius)
            var radius = min(2_000, maxRadius)
            while true {
                // Candidates from the R*Tree, measured by haversine from their coordinates alone (cheap rows).
                let box = Self.boundingBox(around: point, metres: radius)
                var candidates: [(id: Int64, storeId: String, metres: Double)] = []
                for lngRange in box.longitudes {
                    let rows = try Row.fetchCursor(
                        db,
                        sql: """
                            SELECT pois.id, pois.store_id, pois.latitude, pois.longitude FROM poi_rtree r JOIN pois ON pois.id = r.id
                            WHERE r.max_lat >= ? AND r.min_lat <= ? AND r.max_lng >= ? AND r.min_lng <= ?
                            """, arguments: [box.minLat, box.maxLat, lngRange.lowerBound, lngRange.upperBound])
                    while let row = try rows.next() {
                        let metres = point.distance(to: Coordinate(latitude: row[2], longitude: row[3]))
                        if metres <= radius { candidates.append((row[0], row[1], metres)) }
                    }
                }
                candidates.sort { ($0.metres, $0.storeId) < ($1.metres, $1.storeId) }
                // Full rows only for the nearest candidates, in order, until enough pass the filter.
                var matches: [PlaceMatch] = []
                var next = 0
                while matches.count < query.limit, next < candidates.count {
                    let batch = candidates[next..<min(candidates.count, next + max(query.limit, 64))]
                    next = batch.endIndex
                    let pois = try Self.pois(db, ids: batch.map(\.id))
                    for candidate in batch {
                        guard let poi = pois[candidate.id], query.accepts(poi) else { continue }
                        matches.append(PlaceMatch(poi: poi, distance: candidate.metres))
                        if matches.count == query.limit { break }
                    }
                }
                if matches.count >= query.limit || radius >= maxRadius || candidates.count >= total { return matches }
                radius = min(radius * 4, maxRadius)
            }
        }
    }

    /// Full POIs for row ids.
    static func pois(_ db: Database, ids: [Int64]) throws -> [Int64: POI] {
        let marks = Array(repeating: "?", count: ids.count).joined(separator: ",")
        var found: [Int64: POI] = [:]
        for row in try Row.fetchAll(
            db, sql: "\(columns), pois.id FROM pois WHERE pois.id IN (\(marks))",
            arguments: StatementArguments(ids))
        {
            found[row[12]] = try poi(row)
        }
        return found
    }

    struct Box {
        var minLat: Double
        var maxLat: Double
        var longitudes: [ClosedRange<Double>]
    }

    /// A latitude/longitude box containing every point within `metres` great-circle distance of `center`.
    static func boundingBox(around center: Coordinate, metres: Double) -> Box {
        let angle = metres / Coordinate.earthRadius
        // Padded by about 0.1 mm so rounding can never drop a place lying exactly `metres` away: the box only
        // selects candidates, the haversine check decides.
        let latDelta = angle * 180 / .pi + 1e-9
        let minLat = center.latitude - latDelta
        let maxLat = center.latitude + latDelta
        if minLat <= -90 || maxLat >= 90 || angle >= .pi / 2 {
            return Box(minLat: max(minLat, -90), maxLat: min(maxLat, 90), longitudes: [-180...180])
        }
        let ratio = sin(angle) / cos(center.latitude * .pi / 180)
        guard ratio < 1 else { return Box(minLat: minLat, maxLat: maxLat, longitudes: [-180...180]) }
        let lngDelta = asin(ratio) * 180 / .pi + 1e-9
        let low = center.longitude - lngDelta
        let high = center.longitude + lngDelta
        var ranges: [ClosedRange<Double>] = []
        if low < -180 {
            ranges = [(low + 360)...180, -180...high]
        } else if high > 180 {
            ranges = [low...180, -180...(high - 360)]
        } else {
            ranges = [low...high]
        }
        return Box(minLat: minLat, maxLat: maxLat, longitudes: ranges)
    }

    static let columns = """
        SELECT pois.store_id, pois.name, pois.latitude, pois.longitude, pois.address_lines, pois.city, pois.zipcode,
               pois.country_code, pois.types, pois.tags, pois.contact, pois.user_properties
        """

    static func poi(_ row: Row) throws -> POI {
        POI(
            storeId: row[0], name: row[1], coordinate: Coordinate(latitude: row[2], longitude: row[3]),
            address: POI.Address(lines: try strings(row[4]), countryCode: row[7], city: row[5], zipcode: row[6]),
            types: try strings(row[8]), tags: try strings(row[9]),
            contact: try decode(row[10]), userProperties: try decode(row[11]))
    }

    /// JSON text for a list of strings (stored in TEXT columns), written by the project's own JSON writer.
    static func json(_ strings: [String]) -> String {
        json(.array(strings.map(JSONValue.string)))
    }

    static func json(_ value: JSONValue) -> String {
        String(decoding: JSONWriter.bytes(value), as: UTF8.self)
    }

    static func decode(_ text: String?) throws -> JSONValue? {
        guard let text else { return nil }
        return try JSONParser.parse(Array(text.utf8))
    }

    static func strings(_ text: String?) throws -> [String] {
        guard case .array(let values)? = try decode(text) else { return [] }
        return values.compactMap(\.stringValue)
    }
}
