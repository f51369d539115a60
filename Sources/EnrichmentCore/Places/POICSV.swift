import Essentials
public import Foundation

/// Reads POIs from CSV with a header row (RFC 4180 quoting), through a column mapping.
///
/// Without a mapping the header must already be in store terms (see `POIColumnMapping.inferred`): `store_id` (or
/// `id`), `lat`/`latitude`, `lng`/`lon`/`longitude` are required; other columns are ignored.
public struct POICSV {
    private enum Input {
        case column(Int)
        case row
    }
    private let inputs: [(field: POIColumnMapping.Field, input: Input)]
    private let idPrefix: String

    /// Resolves the mapping against the header; throws when a mapped column is missing from it.
    public init(header: [String], mapping: POIColumnMapping? = nil) throws(POIImportError) {
        let names = header.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        var mapping = mapping ?? POIColumnMapping.headerNames()
        if mapping.fields.isEmpty {
            mapping = POIColumnMapping(
                fields: POIColumnMapping.inferred(from: header).fields, idPrefix: mapping.idPrefix)
        }
        if mapping.fields.isEmpty || !mapping.fields.contains(where: { $0.field == .storeId }) {
            throw .csv(
                line: 1,
                reason:
                    "header has no store_id column; required columns are store_id, lat, lng (or pass a column mapping, e.g. --map geonames)"
            )
        }
        var inputs: [(field: POIColumnMapping.Field, input: Input)] = []
        for (field, source) in mapping.fields {
            switch source {
            case .rowNumber: inputs.append((field, .row))
            case .column(let name):
                guard let index = names.firstIndex(of: name.lowercased()) else {
                    throw .csv(
                        line: 1,
                        reason: "header has no \(name) column (the header is: \(header.joined(separator: ",")))")
                }
                inputs.append((field, .column(index)))
            }
        }
        for (required, label) in [(POIColumnMapping.Field.lat, "lat"), (.lng, "lng")]
        where !inputs.contains(where: { $0.field == required }) {
            throw .csv(line: 1, reason: "header has no \(label) column; required columns are store_id, lat, lng")
        }
        self.inputs = inputs
        self.idPrefix = mapping.idPrefix
    }

    /// Converts one data record (1-based data row `row`) into a POI, or a reason it cannot be.
    public func poi(from record: [String], row: Int) -> Result<POI, WoosmapFormat.FeatureProblem> {
        var id = ""
        var name = ""
        var latText = ""
        var lngText = ""
        var address = POI.Address()
        var types: [String] = []
        var tags: [String] = []
        var user: [String: JSONValue] = [:]
        func list(_ value: String, _ separator: Character) -> [String] {
            value.split(separator: separator).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        for (field, input) in inputs {
            let value: String
            switch input {
            case .row: value = String(row)
            case .column(let index): value = index < record.count ? record[index] : ""
            }
            switch field {
            case .storeId: id = value.trimmingCharacters(in: .whitespaces)
            case .name: name = value
            case .lat: latText = value.trimmingCharacters(in: .whitespaces)
            case .lng: lngText = value.trimmingCharacters(in: .whitespaces)
            case .city: address.city = value.isEmpty ? nil : value
            case .zipcode: address.zipcode = value.isEmpty ? nil : value
            case .countryCode: address.countryCode = value.isEmpty ? nil : value
            case .address: address.lines = list(value, "|")
            case .types: types = list(value, ";")
            case .tags: tags = list(value, ";")
            case .user(let key): if !value.isEmpty { user[key] = Self.userValue(value) }
            }
        }
        func skip(_ reason: String, _ value: String?) -> Result<POI, WoosmapFormat.FeatureProblem> {
            .failure(.init(index: 0, reason: reason, value: value))
        }
        guard !id.isEmpty else { return skip("store_id is empty", nil) }
        guard !latText.isEmpty else { return skip("lat is empty", nil) }
        guard !lngText.isEmpty else { return skip("lng is empty", nil) }
        guard let lat = Double(latText), lat.isFinite else { return skip("lat is not a decimal number", latText) }
        guard let lng = Double(lngText), lng.isFinite else { return skip("lng is not a decimal number", lngText) }
        guard (-90...90).contains(lat) else { return skip("lat is outside [-90, 90]", latText) }
        guard (-180...180).contains(lng) else { return skip("lng is outside [-180, 180]", lngText) }
        return .success(
            POI(
                storeId: idPrefix + id, name: name, coordinate: Coordinate(latitude: lat, longitude: lng),
                address: address, types: types, tags: tags,
                userProperties: user.isEmpty ? nil : .object(user)))
    }

    /// JSON-number text becomes a number (so `user.population:>1000` compares numerically); the rest stays text.
    static func userValue(_ text: String) -> JSONValue {
        guard PlaceFilter.Parser.isNumber(text) else { return .string(text) }
        if let int = Int64(text) { return .int(int) }
        if let double = Double(text), double.isFinite { return .double(double) }
        return .string(text)
    }

    /// Parses a whole CSV document; bad rows are reported with their 1-based line number, not fatal.
    public static func parse(
        _ data: Data, mapping: POIColumnMapping? = nil,
        rowLimit: Int = POIBatch.maximumRows
    ) throws(POIImportError) -> POIBatch {
        var reader = CSVRecordReader(data: data)
        var batch = POIBatch()
        batch.rowLimit = rowLimit
        do { try read(&reader, mapping: mapping, into: &batch) } catch let error as POIImportError {
            throw error
        } catch {
            preconditionFailure("a batch that keeps its POIs hands none on: \(error)")
        }
        return batch
    }

    /// Reads the records of `reader` into `batch` (which keeps them, or hands them on in chunks).
    static func read(_ reader: inout CSVRecordReader, mapping: POIColumnMapping?, into batch: inout POIBatch) throws {
        guard let header = try reader.next() else {
            throw POIImportError.csv(line: 1, reason: "file is empty; expected a header row")
        }
        let csv = try POICSV(header: header.fields, mapping: mapping)
        var row = 0
        while let record = try reader.next() {
            if record.fields.count == 1, record.fields[0].isEmpty { continue }
            try batch.checkRowLimit(line: record.line)
            row += 1
            switch csv.poi(from: record.fields, row: row) {
            case .success(let poi): try batch.add(poi)
            case .failure(let problem):
                batch.reject(.init(index: record.line, reason: problem.reason, value: problem.value))
            }
        }
    }
}

/// Splits CSV bytes into records, honouring quotes (embedded commas, quotes and newlines).
public struct CSVRecordReader {
    private var bytes: [UInt8]
    private var position = 0
    private var line = 1
    /// The next chunk of a file read a piece at a time (nil: everything is in `bytes`).
    private let more: (() throws -> [UInt8]?)?

    public init(data: Data) {
        var bytes = [UInt8](data)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        self.bytes = bytes
        more = nil
    }

    /// Reads the chunks `more` returns, in order, until it returns nil; only one chunk is held at a time.
    public init(chunks more: @escaping () throws -> [UInt8]?) rethrows {
        // Enough bytes to see a byte-order mark, however small the chunks.
        var first: [UInt8] = []
        while first.count < 3, let next = try more() { first += next }
        if first.starts(with: [0xEF, 0xBB, 0xBF]) { first.removeFirst(3) }
        bytes = first
        self.more = more
    }

    /// Moves to the next chunk when this one is used up; false at the end of the input.
    private mutating func available() throws(POIImportError) -> Bool {
        if position < bytes.count { return true }
        guard let more else { return false }
        do {
            while let next = try more() {
                bytes = next
                position = 0
                if !next.isEmpty { return true }
            }
        } catch {
            throw .csv(line: line, reason: "the file could not be read: \(error)")
        }
        bytes = []
        position = 0
        return false
    }

    /// Most fields in one record: a line of commas must not become millions of strings.
    public static let maximumFields = 1_000

    /// The next record and the line it started on, or nil at the end.
    public mutating func next() throws(POIImportError) -> (fields: [String], line: Int)? {
        guard try available() else { return nil }
        let startLine = line
        var fields: [String] = []
        var field: [UInt8] = []
        var quoted = false
        while try available() {
            let byte = bytes[position]
            position += 1
            if quoted {
                if byte == UInt8(ascii: "\"") {
                    if try available(), bytes[position] == UInt8(ascii: "\"") {
                        field.append(byte)
                        position += 1
                    } else {
                        quoted = false
                    }
                } else {
                    if byte == UInt8(ascii: "\n") { line += 1 }
                    field.append(byte)
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): quoted = true
            case UInt8(ascii: ","):
                guard fields.count < Self.maximumFields else {
                    throw .csv(
                        line: startLine,
                        reason:
                            "a record has more than \(Self.maximumFields) fields; check the separator (a comma) and the quoting"
                    )
                }
                fields.append(String(decoding: field, as: UTF8.self))
                field.removeAll(keepingCapacity: true)
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
