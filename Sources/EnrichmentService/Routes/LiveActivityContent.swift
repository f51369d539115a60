import EnrichmentCore
import Essentials
import Foundation

/// Fills a Live Activity's `content-state` from the device's last fix and nearest places, with the body
/// template's variables: a string value of the content-state may use `{{name}}`, `{{distance}}`,
/// `{{distance_m}}`, `{{city}}`, `{{zipcode}}`, `{{country_code}}`, `{{address}}`, `{{lat}}`, `{{lng}}`,
/// `{{poi_lat}}`, `{{poi_lng}}`, `{{region}}`, `{{zone}}`, plus `{{body}}` (the notification body the service
/// writes) and `{{map_url}}` (the static map). A value that is exactly one numeric variable (`"{{distance_m}}"`,
/// `"{{lat}}"`...) becomes a JSON number, so that a `ContentState` with an `Int` or `Double` field decodes it.
/// Values the device has none of (no fix, no place near) render empty; the answer says why.
enum LiveActivityContent {
    static let textVariables: Set<String> = [
        "name", "distance", "distance_m", "city", "zipcode", "country_code", "address", "lat", "lng", "poi_lat",
        "poi_lng", "region", "zone", "body", "map_url",
    ]
    static let numericVariables: Set<String> = ["distance_m", "lat", "lng", "poi_lat", "poi_lng"]

    struct Filled: Sendable {
        var contentState: JSONValue
        var outcome: String
        var rule: String
        var nearestPOI: String?
        var fixAgeSeconds: Double?
    }

    /// The content-state with every template filled for `deviceId` as of `at`.
    static func fill(_ contentState: JSONValue, deviceId: String, enricher: Enricher, at: Date) async throws
        -> Filled
    {
        // Compile first: a typo is a 400 before anything is read.
        var templates: [String: TextTemplate] = [:]
        try collect(contentState, path: "content_state", into: &templates)
        // The enrichment of a location alert for the device, as a push would get it: the fix, the places, the map.
        let probe = JSONValue.object([
            "aps": .object([
                "alert": .object(["title": .string("Live Activity"), "body": .string(" ")]),
                "mutable-content": .int(1), "category": .string("location"),
                "timestamp": .int(Int64(at.timeIntervalSince1970.rounded(.down))),
            ])
        ])
        let result = try await enricher.enrich(
            deviceId: deviceId, payload: try NotificationPayload(json: probe), at: at, mode: .default)
        var values: [String: String] = [:]
        if let fix = result.fix {
            values["lat"] = CFormat.fixed(fix.latitude, decimals: 5)
            values["lng"] = CFormat.fixed(fix.longitude, decimals: 5)
        }
        if let nearest = result.pois.first {
            // Decoded once (a POI from the places index is decoded each time one of its fields is read).
            let poi = nearest.poi
            values["name"] = poi.name
            values["distance"] = BodyTemplate.readableDistance(nearest.distance)
            values["distance_m"] = String(Int(nearest.distance.rounded()))
            values["city"] = poi.address.city
            values["zipcode"] = poi.address.zipcode
            values["country_code"] = poi.address.countryCode
            values["poi_lat"] = CFormat.fixed(poi.coordinate.latitude, decimals: 5)
            values["poi_lng"] = CFormat.fixed(poi.coordinate.longitude, decimals: 5)
        }
        if result.outcome == .enriched || result.outcome == .degraded { values["body"] = result.notification.body }
        values["map_url"] = result.staticMapURL
        values["region"] = result.deviceContext?.region
        values["zone"] = result.deviceContext?.zone
        return Filled(
            contentState: render(contentState, templates: templates, values: values, path: "content_state"),
            outcome: result.outcome.rawValue, rule: result.rule, nearestPOI: result.pois.first?.name,
            fixAgeSeconds: result.fix?.ageSeconds)
    }

    /// Compiles every string value that holds a template, keyed by its path.
    static func collect(_ value: JSONValue, path: String, into templates: inout [String: TextTemplate]) throws {
        switch value {
        case .string(let text) where text.contains("{{"):
            do {
                templates[path] = try TextTemplate(text, variables: textVariables)
            } catch {
                throw APIError.invalid(
                    .invalidRequest,
                    "\(path): \(error.detail) (variables: \(textVariables.sorted().joined(separator: ", ")))",
                    field: path)
            }
        case .object(let members):
            for (key, member) in members { try collect(member, path: "\(path).\(key)", into: &templates) }
        case .array(let items):
            for (index, item) in items.enumerated() { try collect(item, path: "\(path)[\(index)]", into: &templates) }
        default:
            break
        }
    }

    static func render(_ value: JSONValue, templates: [String: TextTemplate], values: [String: String], path: String)
        -> JSONValue
    {
        switch value {
        case .string(let text):
            guard let template = templates[path] else { return value }
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("{{"), trimmed.hasSuffix("}}"), trimmed.filter({ $0 == "{" }).count == 2 {
                let name = String(trimmed.dropFirst(2).dropLast(2)).trimmingCharacters(in: .whitespaces)
                if numericVariables.contains(name) {
                    guard let text = values[name] else { return .null }
                    if let whole = Int64(text) { return .int(whole) }
                    if let number = Double(text) { return .double(number) }
                }
            }
            return .string(template.render(values))
        case .object(let members):
            var out: [String: JSONValue] = [:]
            for (key, member) in members {
                out[key] = render(member, templates: templates, values: values, path: "\(path).\(key)")
            }
            return .object(out)
        case .array(let items):
            return .array(
                items.enumerated().map { render($1, templates: templates, values: values, path: "\(path)[\($0)]") })
        default:
            return value
        }
    }
}
