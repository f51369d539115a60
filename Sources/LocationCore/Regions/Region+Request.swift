import EnrichmentCore
public import Essentials

/// Why a region was refused: the member at fault and what is allowed.
public struct RegionProblem: Error, Sendable, CustomStringConvertible {
    public var field: String
    public var description: String
}

extension Region {
    /// Reads a `POST /v1/regions` body into a custom region (`custom_<id>`): a circle with radii allowed in `radius`,
    /// or a polygon (`polygon(from:maximumReach:)`) that the largest such circle could hold.
    public static func custom(from document: JSONValue, radius allowed: ClosedRange<Double>) throws(RegionProblem)
        -> Region
    {
        guard case .object(let fields) = document else {
            throw RegionProblem(
                field: "body",
                description:
                    "body must be a JSON object {\"id\", \"latitude\", \"longitude\", \"radius\"} or {\"id\", \"polygon\"}"
            )
        }
        let known: Set<String> = [
            "id", "latitude", "longitude", "radius", "polygon", "wifi_ssid", "wifi_bssid", "policy", "push_payload",
        ]
        if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
            throw RegionProblem(
                field: unknown,
                description: "\(unknown) is not a region field; allowed: \(known.sorted().joined(separator: ", "))")
        }
        guard let id = fields["id"]?.stringValue, !id.isEmpty, id.count <= 200,
            !InputText.hasControlCharacters(id)
        else {
            throw RegionProblem(
                field: "id", description: "id must be 1-200 characters, without control characters")
        }
        guard !id.contains("position") else {
            throw RegionProblem(
                field: "id", description: "id must not contain 'position': the SDK treats such regions as its own")
        }
        var shape: (latitude: Double, longitude: Double, radius: Double)?
        var polygon: GeoPolygon?
        if let raw = fields["polygon"] {
            if let circle = ["latitude", "longitude", "radius"].first(where: { fields[$0] != nil }) {
                throw RegionProblem(
                    field: "polygon",
                    description: "a region is either a circle (latitude, longitude, radius) or a polygon, never both: "
                        + "this one has polygon and \(circle)")
            }
            polygon = try Region.polygon(from: raw, maximumReach: allowed.upperBound)
        } else {
            shape = try circle(fields, radius: allowed)
        }
        var ssid: String?
        if let raw = fields["wifi_ssid"], raw != .null {
            guard let text = raw.stringValue, !text.isEmpty, text.count <= 32,
                !InputText.hasControlCharacters(text)
            else {
                throw RegionProblem(
                    field: "wifi_ssid",
                    description: "wifi_ssid must be a network name of 1-32 characters, without control characters")
            }
            ssid = text
        }
        var bssid: String?
        if let raw = fields["wifi_bssid"], raw != .null {
            guard let text = raw.stringValue, InputText.isMACAddress(text) else {
                throw RegionProblem(field: "wifi_bssid", description: "wifi_bssid must look like a4:2b:b0:12:34:56")
            }
            bssid = text.lowercased()
        }
        var policy = Region.Policy.either
        if let raw = fields["policy"], raw != .null {
            guard let text = raw.stringValue, let value = Region.Policy(rawValue: text) else {
                throw RegionProblem(field: "policy", description: "policy must be circle, wifi or either")
            }
            policy = value
        }
        var payload: JSONValue?
        if let raw = fields["push_payload"], raw != .null {
            guard case .object = raw, raw["aps"]?.objectValue != nil else {
                throw RegionProblem(
                    field: "push_payload",
                    description: "push_payload must be an APNs payload object with an aps dictionary")
            }
            payload = raw
        }
        if let polygon {
            return Region.polygonal(
                id: "custom_\(id)", polygon: polygon, wifiSSID: ssid, wifiBSSID: bssid, policy: policy,
                pushPayload: payload)
        }
        let circle = shape ?? (0, 0, 0)
        return Region(
            id: "custom_\(id)", latitude: circle.latitude, longitude: circle.longitude, radius: circle.radius,
            wifiSSID: ssid, wifiBSSID: bssid, policy: policy, pushPayload: payload)
    }

    /// The circle of a body without `polygon`: `latitude`, `longitude` and `radius`.
    static func circle(_ fields: [String: JSONValue], radius allowed: ClosedRange<Double>) throws(RegionProblem) -> (
        latitude: Double, longitude: Double, radius: Double
    ) {
        if fields["latitude"] == nil, fields["longitude"] == nil, fields["radius"] == nil {
            throw RegionProblem(
                field: "latitude",
                description: "a region needs latitude, longitude and radius (a circle) or polygon (a polygon)")
        }
        func number(_ key: String) throws(RegionProblem) -> Double {
            guard let raw = fields[key], let value = raw.lenientDouble, value.isFinite, raw.stringValue == nil else {
                throw RegionProblem(field: key, description: "\(key) must be a number")
            }
            return value
        }
        let latitude = try number("latitude")
        let longitude = try number("longitude")
        let radius = try number("radius")
        guard (-90...90).contains(latitude) else {
            throw RegionProblem(field: "latitude", description: "latitude \(latitude) is outside [-90, 90]")
        }
        guard (-180...180).contains(longitude) else {
            throw RegionProblem(field: "longitude", description: "longitude \(longitude) is outside [-180, 180]")
        }
        guard allowed.contains(radius) else {
            throw RegionProblem(
                field: "radius",
                description:
                    "radius \(radius) is outside \(allowed.lowerBound)-\(allowed.upperBound) metres"
            )
        }
        return (latitude, longitude, radius)
    }
}
