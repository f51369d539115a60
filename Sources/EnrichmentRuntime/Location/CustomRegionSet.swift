import EnrichmentCore
import LocationCore

/// The custom regions in memory, with a spatial index over their centres for the per-fix selection.
struct CustomRegionSet: Sendable {
    let regions: [Region]
    let byId: [String: Region]
    let index: SpatialIndex

    init(_ regions: [Region]) {
        self.regions = regions
        var byId: [String: Region] = [:]
        for region in regions { byId[region.id] = region }
        self.byId = byId
        index = SpatialIndex(points: regions.map(\.centre))
    }

    /// The `count` regions whose edge is nearest `point` (distance to the centre minus the radius), chosen among
    /// the nearest centres: what a device would monitor there.
    func nearest(_ point: Coordinate, count: Int) -> [Region] {
        guard !regions.isEmpty else { return [] }
        if regions.count <= count { return regions }
        let candidates = index.nearest(to: point, k: min(regions.count, count * 4))
        var ranked: [(region: Region, edge: Double)] = []
        ranked.reserveCapacity(candidates.count)
        for candidate in candidates {
            let region = regions[candidate.item]
            ranked.append((region, candidate.metres - region.radius))
        }
        ranked.sort { a, b in a.edge != b.edge ? a.edge < b.edge : a.region.id < b.region.id }
        return ranked.prefix(count).map(\.region)
    }
}
