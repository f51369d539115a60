import Foundation

/// Nearest places by measuring every one: the reference the spatial index is checked and benchmarked against.
///
/// Same haversine arithmetic and the same order (metres, then store id) as `PlacesIndex`, with none of its
/// pruning; O(n) per query.
public struct BruteForceScan: Sendable {
    private let pois: [POI]
    private let lats: [Double]
    private let cosLats: [Double]
    private let lngs: [Double]

    public init(pois: [POI]) {
        self.pois = pois
        lats = pois.map { Coordinate.radians($0.coordinate.latitude) }
        cosLats = lats.map { cos($0) }
        lngs = pois.map(\.coordinate.longitude)
    }

    /// The `query.limit` nearest POIs passing the query, nearest first.
    public func nearest(to point: Coordinate, query: PlacesQuery) -> [PlaceMatch] {
        let qLat = Coordinate.radians(point.latitude)
        let qCos = cos(qLat)
        let k = query.limit
        guard k > 0 else { return [] }
        var best: [(metres: Double, index: Int)] = []
        best.reserveCapacity(k + 1)
        func before(_ a: (metres: Double, index: Int), _ b: (metres: Double, index: Int)) -> Bool {
            a.metres != b.metres ? a.metres < b.metres : pois[a.index].storeId < pois[b.index].storeId
        }
        for i in 0..<pois.count {
            let metres = Coordinate.haversine(
                lat1: qLat, cosLat1: qCos, lng1: point.longitude,
                lat2: lats[i], cosLat2: cosLats[i], lng2: lngs[i])
            if let radius = query.radius, metres > radius { continue }
            if best.count == k, metres > best[k - 1].metres { continue }
            if let filter = query.filter, !filter.matches(pois[i]) { continue }
            let candidate = (metres, i)
            var at = best.count
            while at > 0, before(candidate, best[at - 1]) { at -= 1 }
            guard at < k else { continue }
            best.insert(candidate, at: at)
            if best.count > k { best.removeLast() }
        }
        return best.map { PlaceMatch(poi: pois[$0.index], distance: $0.metres) }
    }
}
