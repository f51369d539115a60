import EnrichmentCore
public import Essentials
public import LocationCore

/// The custom regions in memory, one set per app: a device is evaluated against its own app's regions only.
struct AppRegionSets: Sendable {
    let byApp: [String: CustomRegionSet]
    static let none = CustomRegionSet([])

    init(_ regions: [Region]) {
        var grouped: [String: [Region]] = [:]
        for region in regions { grouped[AppNamespace.app(ofRegion: region.id), default: []].append(region) }
        byApp = grouped.mapValues(CustomRegionSet.init)
    }

    /// The regions of the device's app (by its stored key).
    func set(forDevice key: String) -> CustomRegionSet { byApp[AppNamespace.app(of: key)] ?? Self.none }

    /// A region by its stored id, in whichever app.
    func region(id: String) -> Region? { byApp[AppNamespace.app(ofRegion: id)]?.byId[id] }
}

/// One app's custom regions, with a spatial index over their centres for the per-fix selection.
struct CustomRegionSet: Sendable {
    let regions: [Region]
    let byId: [String: Region]
    let index: SpatialIndex
    /// The largest radius (a polygon's: the circle around it): a region whose centre is farther than this plus the
    /// fix's accuracy cannot hold it.
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

    /// The `count` regions whose edge is nearest `point` (distance to the centre minus the radius; for a polygon, to
    /// its nearest edge, negative inside: `Region.edgeDistance`), chosen among
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
            let edge =
                region.polygon == nil ? candidate.metres - region.radius : region.edgeDistance(to: point)
            ranked.append((region, edge))
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

extension LocationEvent {
    /// The event as its app knows it: its device id and custom region id without the app (`AppNamespace`).
    public var appJSON: JSONValue {
        let app = AppNamespace.app(of: deviceId)
        guard case .object(var object) = json else { return json }
        object["device_id"] = .string(AppNamespace.id(of: deviceId))
        if case .string(let region)? = object["region_id"], AppNamespace.customRegionApp(region) == app {
            object["region_id"] = .string(AppNamespace.shownRegion(region))
        }
        return .object(object)
    }

    /// The webhook's body: the event as its app knows it, and the app.
    public var webhookJSON: JSONValue {
        guard case .object(var object) = appJSON else { return json }
        object["app"] = .string(AppNamespace.app(of: deviceId))
        return .object(object)
    }
}
