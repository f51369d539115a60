public import EnrichmentCore
public import Essentials

/// A region a device can enter and exit (docs/LOCATION-RULES.md §4): a circle, or for custom regions a polygon,
/// optionally tied to a Wi-Fi network (GeofenceKit's rule).
public struct Region: Sendable, Equatable {
    /// How a region decides "inside": by its shape (`circle`, the name kept for a polygon too), by the Wi-Fi
    /// network the fix reports, or either.
    public enum Policy: String, Sendable, CaseIterable {
        case circle, wifi, either
    }

    /// `custom_<id>`, `poi_<store_id>_<name> - <radius> m`, or `zoi_<zoi id>`.
    public var id: String
    /// A circle's centre; a polygon's `GeoPolygon.centre` (the middle of its box).
    public var latitude: Double
    public var longitude: Double
    /// A circle's radius; a polygon's `GeoPolygon.reach` (a circle around `latitude`, `longitude` that holds it).
    public var radius: Double
    /// The polygon of a polygon region (nil: a circle). Inside is `GeoPolygon`'s even-odd rule (§4.5).
    public var polygon: GeoPolygon?
    public var wifiSSID: String?
    public var wifiBSSID: String?
    public var policy: Policy
    /// For custom regions: a payload pushed (enriched) to the device on enter, when set.
    public var pushPayload: JSONValue?
    /// For POI regions: the POI's fields carried by its events; for zone regions: the period.
    public var extra: [String: JSONValue]

    public init(
        id: String, latitude: Double, longitude: Double, radius: Double, wifiSSID: String? = nil,
        wifiBSSID: String? = nil, policy: Policy = .either, pushPayload: JSONValue? = nil,
        extra: [String: JSONValue] = [:], polygon: GeoPolygon? = nil
    ) {
        self.id = id
        self.polygon = polygon
        self.latitude = latitude
        self.longitude = longitude
        self.radius = radius
        self.wifiSSID = wifiSSID
        self.wifiBSSID = wifiBSSID
        self.policy = policy
        self.pushPayload = pushPayload
        self.extra = extra
    }

    public var centre: Coordinate { Coordinate(latitude: latitude, longitude: longitude) }

    /// Which family the id names (the SDK's substring test, in its order).
    public var kind: String {
        // Judged on the id its app knows (an app's id is no part of the SDK's test).
        let id = AppNamespace.shownRegion(self.id)
        if id.contains("position") { return "position" }
        if id.contains("custom") { return "custom" }
        if id.hasPrefix("zoi_") { return "zoi" }
        if id.contains("poi") { return "poi" }
        return "custom"
    }

    /// A polygon region of `polygon`, shown (and first searched) as the circle around it.
    public static func polygonal(
        id: String, polygon: GeoPolygon, wifiSSID: String? = nil, wifiBSSID: String? = nil, policy: Policy = .either,
        pushPayload: JSONValue? = nil
    ) -> Region {
        let centre = polygon.centre
        return Region(
            id: id, latitude: centre.latitude, longitude: centre.longitude, radius: polygon.reach, wifiSSID: wifiSSID,
            wifiBSSID: wifiBSSID, policy: policy, pushPayload: pushPayload, polygon: polygon)
    }

    /// `circle` or `polygon`.
    public var shape: String { polygon == nil ? "circle" : "polygon" }

    /// Whether the fix's position, with its accuracy, is in the shape: for a circle the strict rule of §4.5 rule 2
    /// (`distance − accuracy < radius`); for a polygon, by the same reading (the accuracy's disc reaches into it),
    /// the fix inside by the even-odd rule or nearer an edge than its accuracy (`distance to edge < accuracy`).
    public func shapeHolds(_ fix: LocationFix) -> Bool {
        let accuracy = fix.horizontalAccuracy ?? 0
        guard let polygon else { return centre.distance(to: fix.coordinate) - accuracy < radius }
        if polygon.contains(fix.coordinate) { return true }
        return accuracy > 0 && polygon.distanceToEdges(from: fix.coordinate) < accuracy
    }

    /// How far `point` is from the region's edge, in metres, negative inside: what ranks the regions a device
    /// monitors (`distance − radius` for a circle).
    public func edgeDistance(to point: Coordinate) -> Double {
        guard let polygon else { return centre.distance(to: point) - radius }
        let distance = polygon.distanceToEdges(from: point)
        return polygon.contains(point) ? -distance : distance
    }

    /// Strict "inside" of §4.5 rule 2 (`shapeHolds`), or the Wi-Fi network per the policy.
    public func contains(_ fix: LocationFix, wifiSSID fixSSID: String?, wifiBSSID fixBSSID: String?) -> Bool {
        let inShape = shapeHolds(fix)
        let hasNetwork = wifiSSID != nil || wifiBSSID != nil
        let onNetwork =
            hasNetwork && (wifiSSID == nil || wifiSSID == fixSSID)
            && (wifiBSSID == nil || wifiBSSID == fixBSSID?.lowercased())
        switch policy {
        case .circle: return inShape
        case .wifi: return hasNetwork ? onNetwork : inShape
        case .either: return inShape || onNetwork
        }
    }
}

extension Region: JSONObjectRepresentable {
    public func writeJSON(into object: inout JSONObjectWriter) {
        object.field("id", id)
        object.field("kind", kind)
        object.field("shape", shape)
        object.field("latitude", latitude)
        object.field("longitude", longitude)
        object.field("radius", radius)
        if let polygon {
            object.array("polygon", polygon.vertices) { vertex, object in
                object.field("latitude", vertex.latitude)
                object.field("longitude", vertex.longitude)
            }
        }
        object.field("wifi_ssid", wifiSSID)
        object.field("wifi_bssid", wifiBSSID)
        object.field("policy", policy.rawValue)
        object.field("push_payload", json: pushPayload)
        for (key, value) in extra.sorted(by: { $0.key < $1.key }) { object.field(key, json: value) }
    }
}
