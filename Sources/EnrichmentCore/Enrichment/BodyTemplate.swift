import Foundation
import Mustache

/// The `default` mode's body: a Mustache template over the nearest POI, with plain-text output (no HTML escaping).
///
/// Variables: `name`, `distance` (readable: `85 m`, `120 m`, `1.2 km`, `12 km`), `distance_m` (whole metres),
/// `city`, `zipcode`, `country_code`, `address` (lines joined with `, `), `lat`, `lng` (user, 5 decimals),
/// `poi_lat`, `poi_lng`. Sections such as `{{#city}} in {{city}}{{/city}}` drop text for missing values.
public struct BodyTemplate: Sendable {
    /// The template used when none is configured.
    public static let defaultPOITemplate = "{{name}} is {{distance}} away{{#city}} in {{city}}{{/city}}"
    /// The body used when there is a fix but no POI data (upstream degraded).
    public static let defaultLocationTemplate = "You are near {{lat}}, {{lng}}"

    private let poiTemplate: MustacheTemplate
    private let locationTemplate: MustacheTemplate
    public let poiSource: String
    public let locationSource: String

    /// Compiles both templates; throws a readable error when one does not parse.
    public init(poi: String = defaultPOITemplate, location: String = defaultLocationTemplate) throws(TemplateError) {
        poiSource = poi
        locationSource = location
        poiTemplate = try Self.compile(poi, which: "POI")
        locationTemplate = try Self.compile(location, which: "location")
    }

    private static func compile(_ source: String, which: String) throws(TemplateError) -> MustacheTemplate {
        do {
            return try MustacheTemplate(string: "{{% CONTENT_TYPE: TEXT}}" + source)
        } catch {
            throw TemplateError(which: which, detail: String(describing: error))
        }
    }

    /// The body for a POI near the user.
    public func render(poi match: PlaceMatch, user: Coordinate) -> String {
        var values = locationValues(user)
        let poi = match.poi
        values["name"] = poi.name
        values["distance"] = Self.readableDistance(match.distance)
        values["distance_m"] = String(Int(match.distance.rounded()))
        values["city"] = poi.address.city ?? ""
        values["zipcode"] = poi.address.zipcode ?? ""
        values["country_code"] = poi.address.countryCode ?? ""
        values["address"] = poi.address.lines.joined(separator: ", ")
        values["poi_lat"] = String(format: "%.5f", poi.coordinate.latitude)
        values["poi_lng"] = String(format: "%.5f", poi.coordinate.longitude)
        return poiTemplate.render(values.filter { !$0.value.isEmpty })
    }

    /// The location-only body (used when POI data is unavailable).
    public func render(location user: Coordinate) -> String {
        locationTemplate.render(locationValues(user))
    }

    private func locationValues(_ user: Coordinate) -> [String: String] {
        ["lat": String(format: "%.5f", user.latitude), "lng": String(format: "%.5f", user.longitude)]
    }

    /// Distance for people: whole metres under 100 m, tens of metres under 1 km, 0.1 km under 10 km, then km.
    public static func readableDistance(_ metres: Double) -> String {
        switch metres {
        case ..<99.5: return "\(Int(metres.rounded())) m"
        case ..<995: return "\(Int((metres / 10).rounded()) * 10) m"
        case ..<9_950: return String(format: "%.1f km", metres / 1000)
        default: return "\(Int((metres / 1000).rounded())) km"
        }
    }
}

/// A body template that does not parse.
public struct TemplateError: Error, Equatable, Sendable, CustomStringConvertible {
    public var which: String
    public var detail: String
    public var description: String { "the \(which) body template is not valid Mustache: \(detail)" }
}
