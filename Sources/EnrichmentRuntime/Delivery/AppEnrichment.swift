public import EnrichmentCore
import Essentials

/// An app's own enrichment settings (the apps file's `"enrichment"`): what it leaves out is the service's
/// (`ENRICH_BODY_TEMPLATE`, `ENRICH_PLACES_*`, `ENRICH_MAP_STYLE`).
public struct AppEnrichment: Sendable, Equatable {
    public var bodyTemplate: String?
    public var locationTemplate: String?
    public var placesLimit: Int?
    public var placesRadius: Double?
    public var placesTypes: [String]?
    public var placesTags: [String]?
    public var placesQuery: String?
    public var mapStyle: StaticMapBuilder.Style?

    static let members = [
        "body_template", "location_template", "places_limit", "places_radius", "places_types", "places_tags",
        "places_query", "map_style",
    ]

    /// Reads and checks `"enrichment"` of app `app` (templates compiled, the query parsed).
    static func load(_ value: JSONValue, app: String, fail: (String) -> ConfigurationError)
        throws(ConfigurationError) -> AppEnrichment
    {
        guard case .object(let members) = value else {
            throw fail("app '\(app)': enrichment must be an object (\(members.joined(separator: ", ")))")
        }
        if let unknown = members.keys.sorted().first(where: { !Self.members.contains($0) }) {
            throw fail(
                "app '\(app)': enrichment member '\(unknown)' is unknown (allowed: \(Self.members.joined(separator: ", ")))"
            )
        }
        func string(_ key: String) throws(ConfigurationError) -> String? {
            guard let member = members[key] else { return nil }
            guard let text = member.stringValue, !text.isEmpty else {
                throw fail("app '\(app)': enrichment \(key) must be a non-empty string")
            }
            return text
        }
        func strings(_ key: String) throws(ConfigurationError) -> [String]? {
            guard let member = members[key] else { return nil }
            guard case .array(let items) = member, let texts = Optional(items.compactMap(\.stringValue)),
                texts.count == items.count, texts.allSatisfy({ !$0.isEmpty })
            else { throw fail("app '\(app)': enrichment \(key) must be an array of non-empty strings") }
            return texts
        }
        var settings = AppEnrichment()
        settings.bodyTemplate = try string("body_template")
        settings.locationTemplate = try string("location_template")
        do {
            _ = try BodyTemplate(
                poi: settings.bodyTemplate ?? BodyTemplate.defaultPOITemplate,
                location: settings.locationTemplate ?? BodyTemplate.defaultLocationTemplate)
        } catch {
            throw fail("app '\(app)': enrichment template: \(error)")
        }
        if let member = members["places_limit"] {
            guard case .int(let limit) = member, (1...300).contains(limit) else {
                throw fail("app '\(app)': enrichment places_limit must be an integer 1-300")
            }
            settings.placesLimit = Int(limit)
        }
        if let member = members["places_radius"] {
            guard let radius = member.lenientDouble, member.stringValue == nil, radius > 0, radius.isFinite else {
                throw fail("app '\(app)': enrichment places_radius must be metres > 0")
            }
            settings.placesRadius = radius
        }
        settings.placesTypes = try strings("places_types")
        settings.placesTags = try strings("places_tags")
        settings.placesQuery = try string("places_query")
        if let query = settings.placesQuery {
            do { _ = try PlaceFilter.parse(query) } catch {
                throw fail("app '\(app)': enrichment places_query: \(error)")
            }
        }
        if let style = try string("map_style") {
            guard let known = StaticMapBuilder.Style(rawValue: style) else {
                throw fail("app '\(app)': enrichment map_style must be current or legacy")
            }
            settings.mapStyle = known
        }
        return settings
    }
}
