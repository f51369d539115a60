import Foundation

/// The `default` mode's body: a template over the nearest POI (see `TextTemplate` for the syntax).
///
/// Variables: `name`, `distance` (readable: `85 m`, `140 m`, `1.2 km`, `12 km`), `distance_m` (whole metres),
/// `city`, `zipcode`, `country_code`, `address` (lines joined with `, `), `lat`, `lng` (user, 5 decimals),
/// `poi_lat`, `poi_lng`, and the device's context: `region` (the region it is in) and `zone` (`home` or `work`
/// inside a classified zone). Sections such as `{{#city}} in {{city}}{{/city}}` drop text for missing values.
public struct BodyTemplate: Sendable {
    /// The template used when none is configured.
    public static let defaultPOITemplate =
        "{{name}} is {{distance}} away{{#city}} in {{city}}{{/city}}{{#zone}}, near {{zone}}{{/zone}}"
    /// The body used when there is a fix but no POI data (upstream degraded).
    public static let defaultLocationTemplate = "You are near {{lat}}, {{lng}}"

    static let locationVariables: Set<String> = ["lat", "lng", "region", "zone"]
    static let poiVariables: Set<String> = locationVariables.union(
        ["name", "distance", "distance_m", "city", "zipcode", "country_code", "address", "poi_lat", "poi_lng"])

    private let poiTemplate: TextTemplate
    private let locationTemplate: TextTemplate
    public let poiSource: String
    public let locationSource: String

    /// Compiles both templates; throws a readable error when one does not compile.
    public init(poi: String = defaultPOITemplate, location: String = defaultLocationTemplate) throws(TemplateError) {
        poiSource = poi
        locationSource = location
        poiTemplate = try Self.compile(poi, which: "POI", variables: Self.poiVariables)
        locationTemplate = try Self.compile(location, which: "location", variables: Self.locationVariables)
    }

    private static func compile(_ source: String, which: String, variables: Set<String>) throws(TemplateError)
        -> TextTemplate
    {
        do {
            return try TextTemplate(source, variables: variables)
        } catch {
            throw TemplateError(which: which, detail: error.detail)
        }
    }

    /// The body for a POI near the user.
    public func render(poi match: PlaceMatch, user: Coordinate, context: DeviceContext? = nil) -> String {
        let poi = match.poi
        return poiTemplate.render { name in
            switch name {
            case "name": poi.name
            case "distance": Self.readableDistance(match.distance)
            case "distance_m": String(Int(match.distance.rounded()))
            // A place whose city is itself (a GeoNames city) would read "Lyon is 1.9 km away in Lyon".
            case "city": poi.address.city.flatMap { Self.sameName($0, poi.name) ? nil : $0 }
            case "zipcode": poi.address.zipcode
            case "country_code": poi.address.countryCode
            case "address": poi.address.lines.joined(separator: ", ")
            case "poi_lat": CFormat.fixed(poi.coordinate.latitude, decimals: 5)
            case "poi_lng": CFormat.fixed(poi.coordinate.longitude, decimals: 5)
            default: Self.locationValue(name, user, context)
            }
        }
    }

    /// The location-only body (used when POI data is unavailable).
    public func render(location user: Coordinate, context: DeviceContext? = nil) -> String {
        locationTemplate.render { Self.locationValue($0, user, context) }
    }

    private static func locationValue(_ name: String, _ user: Coordinate, _ context: DeviceContext?) -> String? {
        switch name {
        case "lat": CFormat.fixed(user.latitude, decimals: 5)
        case "lng": CFormat.fixed(user.longitude, decimals: 5)
        case "region": context?.region
        case "zone": context?.zone
        default: nil
        }
    }

    /// True when a city and a place name are the same words (case and accents aside).
    public static func sameName(_ a: String, _ b: String) -> Bool {
        // Walked byte by byte while both sides are ASCII, where letters' case is the only difference there can be:
        // two different ASCII letters (or a letter and a space) are different words whatever accents follow, and
        // most names differ in their first letters. Foundation's comparison only once a non-ASCII byte is met
        // (it cost 2% of enrich-and-send's CPU when called for every delivery).
        func folded(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }
        var left = a.utf8.makeIterator()
        var right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil):
                return true
            case (let x?, let y?) where x < 0x80 && y < 0x80:
                if folded(x) != folded(y) { return false }
            case (nil, let y?) where y < 0x80:
                return false
            case (let x?, nil) where x < 0x80:
                return false
            default:
                return a.compare(b, options: [.caseInsensitive, .diacriticInsensitive]) == .orderedSame
            }
        }
    }

    /// Distance for people: whole metres under 100 m, tens of metres under 1 km, 0.1 km under 10 km, then km.
    public static func readableDistance(_ metres: Double) -> String {
        switch metres {
        case _ where !metres.isFinite || metres < 0: return "? m"
        case ..<99.5: return "\(Int(metres.rounded())) m"
        case ..<995: return "\(Int((metres / 10).rounded()) * 10) m"
        case ..<9_950: return CFormat.fixed(metres / 1000, decimals: 1) + " km"
        default: return "\(Int((metres / 1000).rounded())) km"
        }
    }
}
