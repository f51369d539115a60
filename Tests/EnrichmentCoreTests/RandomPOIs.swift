import EnrichmentCore
import Foundation
import TestSupport

func randomPOIs(_ count: Int, generator: inout SeededGenerator, around center: Coordinate? = nil, spread: Double = 1)
    -> [POI]
{
    (0..<count).map { i in
        let coordinate: Coordinate
        if let center {
            coordinate = Coordinate(
                latitude: max(-90, min(90, center.latitude + Double.random(in: -spread...spread, using: &generator))),
                longitude: max(
                    -180, min(180, center.longitude + Double.random(in: -spread...spread, using: &generator))))
        } else {
            coordinate = Coordinate(
                latitude: Double.random(in: -90...90, using: &generator),
                longitude: Double.random(in: -180...180, using: &generator))
        }
        return POI(
            storeId: "p\(i)", name: "POI \(i)", coordinate: coordinate,
            types: [i % 3 == 0 ? "cafe" : "shop"], tags: i % 5 == 0 ? ["open"] : [])
    }
}

/// The oracle: every POI's haversine distance, sorted by distance then store id (ties are exact duplicates).
func bruteForce(_ pois: [POI], from point: Coordinate, query: PlacesQuery) -> [PlaceMatch] {
    func before(_ a: PlaceMatch, _ b: PlaceMatch) -> Bool { (a.distance, a.poi.storeId) < (b.distance, b.poi.storeId) }
    // A sorted list of the best `limit` seen so far: one pass, no full sort (this runs unoptimised in tests).
    var best: [PlaceMatch] = []
    for poi in pois {
        let distance = point.distance(to: poi.coordinate)
        if let radius = query.radius, distance > radius { continue }
        if best.count == query.limit, let last = best.last, distance > last.distance { continue }
        guard query.accepts(poi) else { continue }
        let match = PlaceMatch(poi: poi, distance: distance)
        let at = best.firstIndex { before(match, $0) } ?? best.count
        if at < query.limit {
            best.insert(match, at: at)
            if best.count > query.limit { best.removeLast() }
        }
    }
    return best
}

/// A world of places shaped like real data: dense clusters, sparse spread, the antimeridian, both poles, and
/// exact duplicates (same point, different ids) so equal distances must be ordered by store id.
func awkwardWorld(generator: inout SeededGenerator) -> [POI] {
    var pois = randomPOIs(2_000, generator: &generator)
    let clusters = [
        Coordinate(latitude: 48.85, longitude: 2.35), Coordinate(latitude: 0, longitude: 179.95),
        Coordinate(latitude: -16.5, longitude: -179.9), Coordinate(latitude: 89.95, longitude: 0),
        Coordinate(latitude: -89.95, longitude: 120), Coordinate(latitude: 35.68, longitude: 139.77),
    ]
    for (c, center) in clusters.enumerated() {
        pois += randomPOIs(500, generator: &generator, around: center, spread: 0.3).map {
            var poi = $0
            poi.storeId = "c\(c)-\(poi.storeId)"
            poi.coordinate = poi.coordinate.wrapped
            return poi
        }
    }
    // Exact duplicates of a few hundred places, under ids that sort before and after the original.
    for i in stride(from: 0, to: pois.count, by: 17) {
        var before = pois[i]
        var after = pois[i]
        before.storeId = "0dup-\(i)"
        after.storeId = "zdup-\(i)"
        pois += [before, after]
    }
    // The poles themselves and points on the antimeridian line, from both sides.
    pois += [
        POI(storeId: "north", name: "", coordinate: Coordinate(latitude: 90, longitude: 0)),
        POI(storeId: "south", name: "", coordinate: Coordinate(latitude: -90, longitude: 45)),
        POI(storeId: "am-east", name: "", coordinate: Coordinate(latitude: 10, longitude: 180)),
        POI(storeId: "am-west", name: "", coordinate: Coordinate(latitude: 10, longitude: -180)),
    ]
    return pois
}
