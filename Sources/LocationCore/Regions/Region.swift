public import EnrichmentCore
public import Essentials

/// A circular region a device can enter and exit (docs/LOCATION-RULES.md §4), optionally tied to a Wi-Fi network
/// (GeofenceKit's rule).
public struct Region: Sendable, Equatable {
    /// How a region decides "inside": by the circle, by the Wi-Fi network the fix reports, or either.
    public enum Policy: String, Sendable, CaseIterable {
        case circle, wifi, either
    }

    /// `custom_<id>`, `poi_<store_id>_<name> - <radius> m`, or `zoi_<zoi id>`.
    public var id: String
    public var latitude: Double
    public var longitude: Double
    public var radius: Double
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
        extra: [String: JSONValue] = [:]
    ) {
        self.id = id
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

    /// Strict "inside" of §4.5 rule 2 (`distance − accuracy < radius`), or the Wi-Fi network per the policy.
    public func contains(_ fix: LocationFix, wifiSSID fixSSID: String?, wifiBSSID fixBSSID: String?) -> Bool {
        let distance = centre.distance(to: fix.coordinate)
        let inCircle = distance - (fix.horizontalAccuracy ?? 0) < radius
        let hasNetwork = wifiSSID != nil || wifiBSSID != nil
        let onNetwork =
            hasNetwork && (wifiSSID == nil || wifiSSID == fixSSID)
            && (wifiBSSID == nil || wifiBSSID == fixBSSID?.lowercased())
        switch policy {
        case .circle: return inCircle
        case .wifi: return hasNetwork ? onNetwork : inCircle
        case .either: return inCircle || onNetwork
        }
    }
}

extension Region: JSONObjectRepresentable {
    public func writeJSON(into object: inout JSONObjectWriter) {
        object.field("id", id)
        object.field("kind", kind)
        object.field("latitude", latitude)
        object.field("longitude", longitude)
        object.field("radius", radius)
        object.field("wifi_ssid", wifiSSID)
        object.field("wifi_bssid", wifiBSSID)
        object.field("policy", policy.rawValue)
        object.field("push_payload", json: pushPayload)
        for (key, value) in extra.sorted(by: { $0.key < $1.key }) { object.field(key, json: value) }
    }
}
