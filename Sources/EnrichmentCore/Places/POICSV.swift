import Foundation

/// Reads POIs from CSV with a header row (RFC 4180 quoting).
///
/// Recognised columns (case-insensitive): `store_id` (or `id`), `name`, `lat`/`latitude`,
/// `lng`/`lon`/`longitude`, `city`, `zipcode`/`zip`, `country_code`/`cc`, `address` (lines separated by `|`),
/// `types` and `tags` (separated by `;`). `store_id`, latitude and longitude are required; other columns are ignored.
public struct POICSV {
    enum Column { case id, name, lat, lng, city, zipcode, country, address, types, tags }

    private let columns: [Int: Column]
    private let width: Int

    /// Reads the header; throws when a required column is missing.
    public init(header: [String]) throws(POIImportError) {
        var columns: [Int: Column] = [:]
        for (index, raw) in header.enumerated() {
            let name = raw.trimmingCharacters(in: .whitespaces).lowercased()
            let column: Column? = switch name {
            case "store_id", "id": .id
            case "name": .name
            case "lat", "latitude": .lat
            case "lng", "lon", "long", "longitude": .lng
            case "city": .city
            case "zipcode", "zip", "postcode": .zipcode
            case "country_code", "cc", "country": .country
            case "address", "lines": .address
            case "types", "type": .types
            case "tags": .tags
            default: nil
            }
            if let column, !columns.values.contains(where: { $0 == column }) { columns[index] = column }
        }
        for (required, label) in [(Column.id, "store_id"), (.lat, "lat"), (.lng, "lng")]
        where !columns.values.contains(where: { $0 == required }) {
            throw .csv(line: 1, reason: "header has no \(label) column; required columns are store_id, lat, lng")
        }
        self.columns = columns
        self.width = header.count
    }

    /// Converts one data record into a POI, or a reason it cannot be.
    public func poi(from record: [String]) -> Result<POI, WoosmapFormat.FeatureProblem> {
        var id = "", name = "", lat: Double?, lng: Double?
        var address = POI.Address(), types: [String] = [], tags: [String] = []
        func list(_ value: String, _ separator: Character) -> [String] {
            value.split(separator: separator).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        for (index, value) in record.enumerated() {
            guard let column = columns[index] else { continue }
            switch column {
            case .id: id = value.trimmingCharacters(in: .whitespaces)
            case .name: name = value
            case .lat: lat = Double(value.trimmingCharacters(in: .whitespaces))
            case .lng: lng = Double(value.trimmingCharacters(in: .whitespaces))
            case .city: address.city = value.isEmpty ? nil : value
            case .zipcode: address.zipcode = value.isEmpty ? nil : value
            case .country: address.countryCode = value.isEmpty ? nil : value
            case .address: address.lines = list(value, "|")
            case .types: types = list(value, ";")
            case .tags: tags = list(value, ";")
            }
        }
        guard !id.isEmpty else { return .failure(.init(index: 0, reason: "store_id is empty")) }
        guard let lat, let lng else { return .failure(.init(index: 0, reason: "lat and lng must be decimal numbers")) }
        let coordinate = Coordinate(latitude: lat, longitude: lng)
        guard coordinate.isValid else { return .failure(.init(index: 0, reason: "coordinates (\(lat), \(lng)) are out of range")) }
        return .success(POI(storeId: id, name: name, coordinate: coordinate, address: address, types: types, tags: tags))
    }

    /// Parses a whole CSV document; bad rows are reported with their 1-based line number, not fatal.
    public static func parse(_ data: Data) throws(POIImportError) -> (pois: [POI], rejected: [WoosmapFormat.FeatureProblem]) {
        var reader = CSVRecordReader(data: data)
        guard let header = reader.next() else { throw .csv(line: 1, reason: "file is empty; expected a header row") }
        let csv = try POICSV(header: header.fields)
        var pois: [POI] = [], rejected: [WoosmapFormat.FeatureProblem] = []
        while let record = reader.next() {
            if record.fields.count == 1, record.fields[0].isEmpty { continue }
            switch csv.poi(from: record.fields) {
            case .success(let poi): pois.append(poi)
            case .failure(let problem): rejected.append(.init(index: record.line, reason: problem.reason))
            }
        }
        return (pois, rejected)
    }
}

/// Splits CSV bytes into records, honouring quotes (embedded commas, quotes and newlines).
public struct CSVRecordReader {
    private let bytes: [UInt8]
    private var position = 0
    private var line = 1

    public init(data: Data) {
        var bytes = [UInt8](data)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        self.bytes = bytes
    }

    /// The next record and the line it started on, or nil at the end.
    public mutating func next() -> (fields: [String], line: Int)? {
        guard position < bytes.count else { return nil }
        let startLine = line
        var fields: [String] = [], field: [UInt8] = [], quoted = false
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            if quoted {
                if byte == UInt8(ascii: "\"") {
                    if position < bytes.count, bytes[position] == UInt8(ascii: "\"") {
                        field.append(byte); position += 1
                    } else { quoted = false }
                } else {
                    if byte == UInt8(ascii: "\n") { line += 1 }
                    field.append(byte)
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): quoted = true
            case UInt8(ascii: ","):
                fields.append(String(decoding: field, as: UTF8.self)); field.removeAll(keepingCapacity: true)
            case UInt8(ascii: "\r"): continue
            case UInt8(ascii: "\n"):
                line += 1
                fields.append(String(decoding: field, as: UTF8.self))
                return (fields, startLine)
            default: field.append(byte)
            }
        }
        fields.append(String(decoding: field, as: UTF8.self))
        return (fields, startLine)
    }
}
