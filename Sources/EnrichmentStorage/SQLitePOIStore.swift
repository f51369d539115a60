import EnrichmentCore
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
            let statement = try db.cachedStatement(sql: """
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
                    try Self.json(poi.address.lines), poi.address.city, poi.address.zipcode, poi.address.countryCode,
                    try Self.json(poi.types), try Self.json(poi.tags),
                    try poi.contact.map(Self.json), try poi.userProperties.map(Self.json), now,
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
    public func nearest(to point: Coordinate, query: PlacesQuery) async throws -> [PlaceMatch] {
        guard query.limit > 0 else { return [] }
        return try await database.pool.read { db in
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pois") ?? 0
            let maxRadius = min(query.radius ?? .infinity, Double.pi * Coordinate.earthRadius)
            var radius = min(2_000, maxRadius)
            while true {
                let box = Self.boundingBox(around: point, metres: radius)
                var matches: [PlaceMatch] = []
                for lngRange in box.longitudes {
                    let rows = try Row.fetchAll(db, sql: """
                        \(Self.columns) FROM pois JOIN poi_rtree r ON r.id = pois.id
                        WHERE r.max_lat >= ? AND r.min_lat <= ? AND r.max_lng >= ? AND r.min_lng <= ?
                        """, arguments: [box.minLat, box.maxLat, lngRange.lowerBound, lngRange.upperBound])
                    for row in rows {
                        let poi = try Self.poi(row)
                        let distance = point.distance(to: poi.coordinate)
                        if distance <= radius, query.accepts(poi) { matches.append(PlaceMatch(poi: poi, distance: distance)) }
                    }
                }
                if matches.count >= query.limit || radius >= maxRadius || matches.count >= total {
                    matches.sort { ($0.distance, $0.poi.storeId) < ($1.distance, $1.poi.storeId) }
                    return Array(matches.prefix(query.limit))
                }
                radius = min(radius * 4, maxRadius)
            }
        }
    }

    struct Box { var minLat: Double; var maxLat: Double; var longitudes: [ClosedRange<Double>] }

    /// A latitude/longitude box containing every point within `metres` great-circle distance of `center`.
    static func boundingBox(around center: Coordinate, metres: Double) -> Box {
        let angle = metres / Coordinate.earthRadius
        let latDelta = angle * 180 / .pi
        let minLat = center.latitude - latDelta, maxLat = center.latitude + latDelta
        if minLat <= -90 || maxLat >= 90 || angle >= .pi / 2 {
            return Box(minLat: max(minLat, -90), maxLat: min(maxLat, 90), longitudes: [-180...180])
        }
        let ratio = sin(angle) / cos(center.latitude * .pi / 180)
        guard ratio < 1 else { return Box(minLat: minLat, maxLat: maxLat, longitudes: [-180...180]) }
        let lngDelta = asin(ratio) * 180 / .pi
        let low = center.longitude - lngDelta, high = center.longitude + lngDelta
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
        POI(storeId: row[0], name: row[1], coordinate: Coordinate(latitude: row[2], longitude: row[3]),
            address: POI.Address(lines: try decode(row[4]) ?? [], countryCode: row[7], city: row[5], zipcode: row[6]),
            types: try decode(row[8]) ?? [], tags: try decode(row[9]) ?? [],
            contact: try decode(row[10]), userProperties: try decode(row[11]))
    }

    static func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }

    static func decode<T: Decodable>(_ text: String?) throws -> T? {
        guard let text else { return nil }
        return try JSONDecoder().decode(T.self, from: Data(text.utf8))
    }
}
