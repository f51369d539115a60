public import Essentials
import Foundation

/// What every database-backed POI store shares: the text form of list and JSON columns, and the exact
/// nearest-k search over a store's own spatial index (SQLite's R*Tree, PostgreSQL's GiST).
public enum StoredPOI {
    /// A POI's row as the stores keep it (lists and objects as JSON text).
    public struct Row: Sendable {
        public var storeId: String
        public var name: String
        public var latitude: Double
        public var longitude: Double
        public var addressLines: String?
        public var city: String?
        public var zipcode: String?
        public var countryCode: String?
        public var types: String?
        public var tags: String?
        public var contact: String?
        public var userProperties: String?

        public init(
            storeId: String, name: String, latitude: Double, longitude: Double, addressLines: String?, city: String?,
            zipcode: String?, countryCode: String?, types: String?, tags: String?, contact: String?,
            userProperties: String?
        ) {
            self.storeId = storeId
            self.name = name
            self.latitude = latitude
            self.longitude = longitude
            self.addressLines = addressLines
            self.city = city
            self.zipcode = zipcode
            self.countryCode = countryCode
            self.types = types
            self.tags = tags
            self.contact = contact
            self.userProperties = userProperties
        }

        /// The row of a POI.
        public init(_ poi: POI) {
            self.init(
                storeId: poi.storeId, name: poi.name, latitude: poi.coordinate.latitude,
                longitude: poi.coordinate.longitude, addressLines: StoredPOI.json(poi.address.lines),
                city: poi.address.city, zipcode: poi.address.zipcode, countryCode: poi.address.countryCode,
                types: StoredPOI.json(poi.types), tags: StoredPOI.json(poi.tags),
                contact: poi.contact.map(StoredPOI.json), userProperties: poi.userProperties.map(StoredPOI.json))
        }

        /// The POI of a row.
        public func poi() throws -> POI {
            POI(
                storeId: storeId, name: name, coordinate: Coordinate(latitude: latitude, longitude: longitude),
                address: POI.Address(
                    lines: try StoredPOI.strings(addressLines), countryCode: countryCode, city: city, zipcode: zipcode),
                types: try StoredPOI.strings(types), tags: try StoredPOI.strings(tags),
                contact: try StoredPOI.decode(contact), userProperties: try StoredPOI.decode(userProperties))
        }
    }

    /// JSON text for a list of strings, written by the project's own JSON writer.
    public static func json(_ strings: [String]) -> String { json(.array(strings.map(JSONValue.string))) }

    public static func json(_ value: JSONValue) -> String { String(decoding: JSONWriter.bytes(value), as: UTF8.self) }

    public static func decode(_ text: String?) throws -> JSONValue? {
        guard let text else { return nil }
        return try JSONParser.parse(Array(text.utf8))
    }

    public static func strings(_ text: String?) throws -> [String] {
        guard case .array(let values)? = try decode(text) else { return [] }
        return values.compactMap(\.stringValue)
    }

    /// A latitude/longitude box holding every point within some great-circle distance of a centre; its longitudes
    /// are one range, or two when the box crosses the antimeridian.
    public struct Box: Sendable, Equatable {
        public var minLat: Double
        public var maxLat: Double
        public var longitudes: [ClosedRange<Double>]
    }

    /// The box around `center` holding every point within `metres`.
    public static func boundingBox(around center: Coordinate, metres: Double) -> Box {
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
        if low < -180 { return Box(minLat: minLat, maxLat: maxLat, longitudes: [(low + 360)...180, -180...high]) }
        if high > 180 { return Box(minLat: minLat, maxLat: maxLat, longitudes: [low...180, -180...(high - 360)]) }
        return Box(minLat: minLat, maxLat: maxLat, longitudes: [low...high])
    }

    /// A candidate from the spatial index: a row id, its store id and coordinates.
    public typealias Candidate = (id: Int64, storeId: String, latitude: Double, longitude: Double)

    /// Exact nearest-k: searches a box that surely holds every POI within r (from 2 km), widening it 4 times
    /// until `query.limit` POIs pass the filter or the whole store was seen. The index only selects candidates;
    /// ranking is by haversine metres, then store id, as everywhere else.
    public static func nearest(
        to point: Coordinate, query: PlacesQuery, total: Int,
        candidates: (Box) async throws -> [Candidate], rows: ([Int64]) async throws -> [Int64: POI]
    ) async throws -> [PlaceMatch] {
        guard query.limit > 0 else { return [] }
        let maxRadius = min(query.radius ?? .infinity, Double.pi * Coordinate.earthRadius)
        var radius = min(2_000, maxRadius)
        while true {
            var near: [(id: Int64, storeId: String, metres: Double)] = []
            for candidate in try await candidates(boundingBox(around: point, metres: radius)) {
                let metres = point.distance(
                    to: Coordinate(latitude: candidate.latitude, longitude: candidate.longitude))
                if metres <= radius { near.append((candidate.id, candidate.storeId, metres)) }
            }
            near.sort { ($0.metres, $0.storeId) < ($1.metres, $1.storeId) }
            // Full rows only for the nearest candidates, in order, until enough pass the filter.
            var matches: [PlaceMatch] = []
            var next = 0
            while matches.count < query.limit, next < near.count {
                let batch = near[next..<min(near.count, next + max(query.limit, 64))]
                next = batch.endIndex
                let pois = try await rows(batch.map(\.id))
                for candidate in batch {
                    guard let poi = pois[candidate.id], query.accepts(poi) else { continue }
                    matches.append(PlaceMatch(poi: poi, distance: candidate.metres))
                    if matches.count == query.limit { break }
                }
            }
            if matches.count >= query.limit || radius >= maxRadius || near.count >= total { return matches }
            radius = min(radius * 4, maxRadius)
        }
    }
}
