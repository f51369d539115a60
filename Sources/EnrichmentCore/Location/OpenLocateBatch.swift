public import Essentials
public import Foundation

/// Parses an OpenLocate batch (`{"locations": [...]}`) into fixes, with a reason for every rejected item.
public struct OpenLocateBatch: Sendable {
    /// Most items accepted in one batch.
    public static let maximumItems = 10_000

    /// One rejected item: its index in `locations` and why.
    public struct Rejection: Sendable, Equatable, JSONObjectRepresentable {
        public var index: Int
        public var reason: String

        public func writeJSON(into object: inout JSONObjectWriter) {
            object.field("index", index)
            object.field("reason", reason)
        }
    }

    public var accepted: [LocationFix]
    public var rejected: [Rejection]

    /// Validates a batch document for a device, stamping `receivedAt` on accepted fixes.
    ///
    /// Latitude and longitude may be numbers or numeric strings; `utc_timestamp` is epoch seconds (number or
    /// numeric string); fixes more than `maxFutureSeconds` ahead of `receivedAt` are rejected as clock errors.
    public static func parse(
        _ document: JSONValue, deviceId: String, receivedAt: Double,
        maxFutureSeconds: Double = 86_400
    ) throws(OpenLocateError) -> OpenLocateBatch {
        guard case .object = document else { throw .notAnObject(found: document.typeName) }
        guard let locationsValue = document["locations"] else { throw .missingLocations }
        guard case .array(let items) = locationsValue else { throw .locationsNotArray(found: locationsValue.typeName) }
        guard items.count <= maximumItems else { throw .tooManyItems(count: items.count, limit: maximumItems) }
        var batch = OpenLocateBatch(accepted: [], rejected: [])
        batch.accepted.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            switch parseItem(item, deviceId: deviceId, receivedAt: receivedAt, maxFutureSeconds: maxFutureSeconds) {
            case .success(let fix): batch.accepted.append(fix)
            case .failure(let reason): batch.rejected.append(Rejection(index: index, reason: reason.message))
            }
        }
        return batch
    }

    /// Parses and validates a batch's body straight from its bytes: the `locations` array is read item by item, each
    /// item's members looked up where they lie (no `JSONValue` tree, no dictionary per item). The same batch, the
    /// same rejections and the same errors as `parse(_:deviceId:receivedAt:maxFutureSeconds:)` of the decoded
    /// document; a body that is not valid JSON throws the parser's `JSONParseError`, anything else
    /// `OpenLocateError`.
    public static func parse(
        json data: Data, deviceId: String, receivedAt: Double, maxFutureSeconds: Double = 86_400
    ) throws -> OpenLocateBatch {
        let read: (object: JSONParser.StreamedObject, batch: OpenLocateBatch, items: Int)
        do {
            read = try stream(data, deviceId: deviceId, receivedAt: receivedAt, maxFutureSeconds: maxFutureSeconds)
        } catch let error as JSONParseError where error.message == JSONParser.StreamedObject.notAnObject {
            // Not an object at all: decoded whole, which names what it is (or where it is not JSON).
            return try parse(
                JSONValue.decode(data), deviceId: deviceId, receivedAt: receivedAt, maxFutureSeconds: maxFutureSeconds)
        }
        guard read.object.streamed else {
            guard let value = read.object.members["locations"] else { throw OpenLocateError.missingLocations }
            throw OpenLocateError.locationsNotArray(found: value.typeName)
        }
        guard read.items <= maximumItems else {
            throw OpenLocateError.tooManyItems(count: read.items, limit: maximumItems)
        }
        return read.batch
    }

    /// The body's `locations` read item by item; the count of items past `maximumItems` only counted.
    private static func stream(_ data: Data, deviceId: String, receivedAt: Double, maxFutureSeconds: Double)
        throws(JSONParseError) -> (object: JSONParser.StreamedObject, batch: OpenLocateBatch, items: Int)
    {
        var batch = OpenLocateBatch(accepted: [], rejected: [])
        var items = 0
        let object = try JSONParser.parseObject(data, streamingElements: "locations") { index, element in
            items += 1
            // Past the limit the rest is only counted (and parsed: a JSON error still comes first).
            guard items <= maximumItems else { return true }
            let result: Result<LocationFix, ItemProblem>
            switch element {
            case .object(let fields):
                result = parseItem(
                    fields: .members(fields), deviceId: deviceId, receivedAt: receivedAt,
                    maxFutureSeconds: maxFutureSeconds)
            case .value(let other):
                result = .failure(ItemProblem(message: "item must be an object, found \(other.typeName)"))
            }
            switch result {
            case .success(let fix): batch.accepted.append(fix)
            case .failure(let reason): batch.rejected.append(Rejection(index: index, reason: reason.message))
            }
            return true
        }
        return (object, batch, items)
    }

    struct ItemProblem: Error { var message: String }

    static func parseItem(
        _ item: JSONValue, deviceId: String, receivedAt: Double,
        maxFutureSeconds: Double
    ) -> Result<LocationFix, ItemProblem> {
        guard case .object(let fields) = item else {
            return .failure(ItemProblem(message: "item must be an object, found \(item.typeName)"))
        }
        return parseItem(
            fields: .dictionary(fields), deviceId: deviceId, receivedAt: receivedAt, maxFutureSeconds: maxFutureSeconds)
    }

    static func parseItem(
        fields: ItemFields, deviceId: String, receivedAt: Double, maxFutureSeconds: Double
    ) -> Result<LocationFix, ItemProblem> {
        func number(_ key: String) -> Result<Double, ItemProblem> {
            guard let raw = fields[key] else { return .failure(ItemProblem(message: "\(key) is missing")) }
            guard let value = raw.lenientDouble else {
                return .failure(
                    ItemProblem(message: "\(key) must be a number or numeric string, found \(raw.typeName)"))
            }
            return .success(value)
        }
        let latitude: Double
        let longitude: Double
        let time: Double
        switch number("latitude") {
        case .success(let v): latitude = v
        case .failure(let e): return .failure(e)
        }
        switch number("longitude") {
        case .success(let v): longitude = v
        case .failure(let e): return .failure(e)
        }
        switch number("utc_timestamp") {
        case .success(let v): time = v
        case .failure(let e): return .failure(e)
        }
        guard (-90...90).contains(latitude) else {
            return .failure(ItemProblem(message: "latitude \(latitude) is outside [-90, 90]"))
        }
        guard (-180...180).contains(longitude) else {
            return .failure(ItemProblem(message: "longitude \(longitude) is outside [-180, 180]"))
        }
        guard time > 0 else { return .failure(ItemProblem(message: "utc_timestamp must be positive epoch seconds")) }
        if time > 1.0e11 {
            return .failure(ItemProblem(message: "utc_timestamp \(time) looks like milliseconds; send epoch seconds"))
        }
        guard time <= receivedAt + maxFutureSeconds else {
            return .failure(ItemProblem(message: "utc_timestamp is more than \(Int(maxFutureSeconds)) s in the future"))
        }
        var accuracy: Double?
        if let raw = fields["horizontal_accuracy"], raw != .null {
            guard let value = raw.lenientDouble, value >= 0 else {
                return .failure(ItemProblem(message: "horizontal_accuracy must be a non-negative number"))
            }
            accuracy = value
        }
        var context: String?
        if let raw = fields["location_context"], raw != .null {
            guard let value = raw.stringValue else {
                return .failure(ItemProblem(message: "location_context must be a string, found \(raw.typeName)"))
            }
            guard value.utf8.count <= 256, !InputText.hasControlCharacters(value) else {
                return .failure(
                    ItemProblem(message: "location_context must be at most 256 bytes, without control characters"))
            }
            context = value
        }
        // The usual item has no other field: then none of OpenLocate's 14 others is looked up.
        let core = 3 + (fields["horizontal_accuracy"] == nil ? 0 : 1) + (fields["location_context"] == nil ? 0 : 1)
        var extras: JSONValue?
        if fields.count > core {
            switch openLocateExtras(fields.dictionary) {
            case .success(let value): extras = value
            case .failure(let problem): return .failure(problem)
            }
        }
        return .success(
            LocationFix(
                deviceId: deviceId, coordinate: Coordinate(latitude: latitude, longitude: longitude),
                fixTime: time, horizontalAccuracy: accuracy, context: context, receivedAt: receivedAt,
                extras: extras))
    }

    /// OpenLocate's other fields and their types; anything else in an item is ignored, as before.
    static let numberFields = ["speed", "course", "altitude", "vertical_accuracy", "utc_timestamp_received"]
    static let stringFields = [
        "wifi_ssid", "wifi_bssid", "carrier_name", "device_model", "os_version", "ad_id", "id_type",
    ]
    static let boolFields = ["is_charging", "ad_opt_out"]

    /// The OpenLocate fields of an item, checked by type (numbers may be numeric strings, as latitude may).
    static func openLocateExtras(_ fields: [String: JSONValue]) -> Result<JSONValue?, ItemProblem> {
        var extras: [String: JSONValue] = [:]
        for key in numberFields {
            guard let raw = fields[key], raw != .null else { continue }
            guard let value = raw.lenientDouble, value.isFinite else {
                return .failure(ItemProblem(message: "\(key) must be a number, found \(raw.typeName)"))
            }
            if key == "course", !(-1..<360).contains(value) {
                return .failure(ItemProblem(message: "course \(value) is outside [0, 360) (or -1 for unknown)"))
            }
            if key == "vertical_accuracy", value < -1 {
                return .failure(ItemProblem(message: "vertical_accuracy must be metres >= 0 (or -1 for unknown)"))
            }
            extras[key] = .double(value)
        }
        for key in stringFields {
            guard let raw = fields[key], raw != .null else { continue }
            guard let value = raw.stringValue, value.utf8.count <= 256, !InputText.hasControlCharacters(value) else {
                return .failure(
                    ItemProblem(message: "\(key) must be a string of at most 256 bytes, without control characters"))
            }
            if key == "wifi_bssid", !InputText.isMACAddress(value) {
                return .failure(ItemProblem(message: "wifi_bssid '\(value)' must look like a4:2b:b0:12:34:56"))
            }
            extras[key] = .string(key == "wifi_bssid" ? value.lowercased() : value)
        }
        for key in boolFields {
            guard let raw = fields[key], raw != .null else { continue }
            switch raw {
            case .bool: extras[key] = raw
            case .string(let text) where text == "true" || text == "false": extras[key] = .bool(text == "true")
            default: return .failure(ItemProblem(message: "\(key) must be true or false, found \(raw.typeName)"))
            }
        }
        return .success(extras.isEmpty ? nil : .object(extras))
    }
}

/// An item's members, looked up by key: a decoded object's dictionary, or the members of one streamed from the body.
enum ItemFields {
    case dictionary([String: JSONValue])
    case members(JSONMembers)

    subscript(key: String) -> JSONValue? {
        switch self {
        case .dictionary(let fields): fields[key]
        case .members(let fields): fields[key]
        }
    }

    var count: Int {
        switch self {
        case .dictionary(let fields): fields.count
        case .members(let fields): fields.count
        }
    }

    var dictionary: [String: JSONValue] {
        switch self {
        case .dictionary(let fields): fields
        case .members(let fields): fields.dictionary
        }
    }
}

/// Why a whole OpenLocate batch was refused.
public enum OpenLocateError: Error, Equatable, Sendable, CustomStringConvertible {
    case notAnObject(found: String)
    case missingLocations
    case locationsNotArray(found: String)
    case tooManyItems(count: Int, limit: Int)

    public var description: String {
        switch self {
        case .notAnObject(let found): "body must be a JSON object {\"locations\": [...]}, found \(found)"
        case .missingLocations:
            "body.locations is missing; send {\"locations\": [{\"latitude\", \"longitude\", \"utc_timestamp\"}]}"
        case .locationsNotArray(let found): "body.locations must be an array, found \(found)"
        case .tooManyItems(let count, let limit): "batch has \(count) locations; at most \(limit) per request"
        }
    }
}
