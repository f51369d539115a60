import EnrichmentCore
import LocationCore

/// The custom regions in memory, with a spatial index over their centres for the per-fix selection.
struct CustomRegionSet: Sendable {
    let regions: [Region]
    let byId: [String: Region]
    let index: SpatialIndex
    /// The largest radius: a region whose centre is farther than this plus the fix's accuracy cannot hold it.
    let maximumRadius: Double
    /// Regions naming a Wi-Fi network, by `ssid:<name>` and `bssid:<address>`: inside wherever the fix reports it.
    let byNetwork: [String: [Region]]

    init(_ regions: [Region]) {
        self.regions = regions
        maximumRadius = regions.map(\.radius).max() ?? 0
        var byId: [String: Region] = [:]
        var byNetwork: [String: [Region]] = [:]
        for region in regions {
            byId[region.id] = region
            if let ssid = region.wifiSSID { byNetwork["ssid:\(ssid)", default: []].append(region) }
            if let bssid = region.wifiBSSID { byNetwork["bssid:\(bssid)", default: []].append(region) }
        }
        self.byId = byId
        self.byNetwork = byNetwork
        index = SpatialIndex(points: regions.map(\.centre))
    }

    /// The `count` regions whose edge is nearest `point` (distance to the centre minus the radius), chosen among
    /// the nearest centres that could hold a fix of accuracy `reach`: what a device would monitor there. Regions
    /// farther away could only give exits, and the ones the device is in are evaluated anyway.
    func nearest(_ point: Coordinate, count: Int, reach: Double) -> [Region] {
        guard !regions.isEmpty else { return [] }
        let candidates = index.nearest(
            to: point, k: min(regions.count, count * 4), maxMetres: maximumRadius + max(reach, 0) + 1)
        var ranked: [(region: Region, edge: Double)] = []
        ranked.reserveCapacity(candidates.count)
        for candidate in candidates {
            let region = regions[candidate.item]
            ranked.append((region, candidate.metres - region.radius))
        }
        ranked.sort { a, b in a.edge != b.edge ? a.edge < b.edge : a.region.id < b.region.id }
        return ranked.prefix(count).map(\.region)
    }

    /// The regions naming the network a fix reports.
    func onNetwork(ssid: String?, bssid: String?) -> [Region] {
        guard !byNetwork.isEmpty else { return [] }
        var found = ssid.flatMap { byNetwork["ssid:\($0)"] } ?? []
        for region in bssid.flatMap({ byNetwork["bssid:\($0)"] }) ?? []
        where !found.contains(where: { $0.id == region.id }) {
            found.append(region)
        }
        return found
    }
}
