import EnrichmentCore
import Foundation
import TestSupport


func randomPOIs(_ count: Int, generator: inout SeededGenerator, around center: Coordinate? = nil, spread: Double = 1) -> [POI] {
    (0..<count).map { i in
        let coordinate: Coordinate
        if let center {
            coordinate = Coordinate(latitude: max(-90, min(90, center.latitude + Double.random(in: -spread...spread, using: &generator))),
                                    longitude: max(-180, min(180, center.longitude + Double.random(in: -spread...spread, using: &generator))))
        } else {
            coordinate = Coordinate(latitude: Double.random(in: -90...90, using: &generator),
                                    longitude: Double.random(in: -180...180, using: &generator))
        }
        return POI(storeId: "p\(i)", name: "POI \(i)", coordinate: coordinate,
                   types: [i % 3 == 0 ? "cafe" : "shop"], tags: i % 5 == 0 ? ["open"] : [])
    }
}

/// The oracle: every POI's haversine distance, sorted.
func bruteForce(_ pois: [POI], from point: Coordinate, query: PlacesQuery) -> [PlaceMatch] {
    pois.filter(query.accepts)
        .map { PlaceMatch(poi: $0, distance: point.distance(to: $0.coordinate)) }
        .filter { query.radius == nil || $0.distance <= query.radius! }
        .sorted { $0.distance < $1.distance }
        .prefix(query.limit).map { $0 }
}
