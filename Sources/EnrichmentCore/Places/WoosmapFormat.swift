public import Essentials
public import Foundation

/// Reads and writes the Woosmap store GeoJSON shape (search responses and POI imports).
public enum WoosmapFormat {
    /// The Woosmap Search API answer for `matches` (keys in alphabetical order, as the API writes them).
    public struct SearchResponse: JSONObjectRepresentable {
        public var matches: [PlaceMatch]
        public var page: Int
        public var pageCount: Int

        public init(_ matches: [PlaceMatch], page: Int = 1, pageCount: Int = 1) {
            self.matches = matches
            self.page = page
            self.pageCount = pageCount
        }

        public func writeJSON(into object: inout JSONObjectWriter) {
            object.array("features", matches) { match, feature in
                WoosmapFormat.writeFeature(match.poi, distance: match.distance, into: &feature)
            }
            object.object("pagination") { pagination in
                pagination.field("page", page)
                pagination.field("pageCount", pageCount)
            }
            object.field("type", "FeatureCollection")
        }
    }

    /// One store as a GeoJSON Feature.
    /// One POI as a Woosmap store Feature (the shape `POST /v1/pois` reads).
    public static func feature(_ poi: POI) -> [UInt8] {
        var feature = JSONObjectWriter(capacity: 512)
        writeFeature(poi, distance: nil, into: &feature)
        return feature.finished()
    }

    static func writeFeature(_ poi: POI, distance: Double?, into feature: inout JSONObjectWriter) {
        feature.object("geometry") { geometry in
            geometry.field(
                "coordinates", json: .array([.double(poi.coordinate.longitude), .double(poi.coordinate.latitude)]))
            geometry.field("type", "Point")
        }
        feature.object("properties") { properties in
            properties.object("address") { address in
                address.field("city", json: poi.address.city.map(JSONValue.string) ?? .null)
                address.field("country_code", json: poi.address.countryCode.map(JSONValue.string) ?? .null)
                address.field("lines", strings: poi.address.lines)
                address.field("zipcode", json: poi.address.zipcode.map(JSONValue.string) ?? .null)
            }
            properties.field("contact", json: poi.contact ?? .object([:]))
            properties.field("distance", distance)
            properties.field("name", poi.name)
            properties.field("store_id", poi.storeId)
            properties.field("tags", strings: poi.tags)
            properties.field("types", strings: poi.types)
            properties.field("user_properties", json: poi.userProperties ?? .object([:]))
        }
        feature.field("type", "Feature")
    }

    /// A problem with one feature of an import or response.
    /// `index` is the feature's position in a GeoJSON import, or the 1-based line of a CSV row; `reason` is the
    /// same text for every row with the same fault, and `value` the offending text when there is one.
    public struct FeatureProblem: Error, Sendable, Equatable, JSONObjectRepresentable {
        public var index: Int
        public var reason: String
        public var value: String?

        public func writeJSON(into object: inout JSONObjectWriter) {
            object.field("index", index)
            object.field("reason", reason)
            object.field("value", value)
        }

        public init(index: Int, reason: String, value: String? = nil) {
            self.index = index
            self.reason = reason
            self.value = value
        }
    }

    /// Parses a FeatureCollection into POIs; features that cannot be read are reported, not fatal.
    public static func parseFeatureCollection(_ document: JSONValue) throws(POIImportError) -> (
        pois: [POI], distances: [Double?], rejected: [FeatureProblem]
    ) {
        guard case .object = document else {
            throw .notAFeatureCollection("body must be a JSON object, found \(document.typeName)")
        }
        guard document["type"]?.stringValue == "FeatureCollection" || document["type"] == nil else {
            throw .notAFeatureCollection("type must be \"FeatureCollection\"")
        }
        guard case .array(let features)? = document["features"] else {
            throw .notAFeatureCollection("features must be an array of GeoJSON Features")
        }
        var pois: [POI] = []
        var distances: [Double?] = []
        var rejected: [FeatureProblem] = []
        pois.reserveCapacity(features.count)
        for (index, feature) in features.enumerated() {
            switch parseFeature(feature) {
            case .success(let (poi, distance)):
                pois.append(poi)
                distances.append(distance)
            case .failure(let problem):
                rejected.append(FeatureProblem(index: index, reason: problem.reason, value: problem.value))
            }
        }
        return (pois, distances, rejected)
    }

    /// Reads a FeatureCollection import from bytes, one feature at a time: only the POIs are kept, so memory
    /// follows what is stored rather than the size of the JSON tree.
    public static func readFeatureCollection(_ data: Data, rowLimit: Int = POIBatch.maximumRows) throws(POIImportError)
        -> POIBatch
    {
        var batch = POIBatch()
        batch.rowLimit = rowLimit
        do { try readFeatureCollection(data, into: &batch) } catch let error as POIImportError {
            throw error
        } catch {
            preconditionFailure("a batch that keeps its POIs hands none on: \(error)")
        }
        return batch
    }

    /// Reads the features of `data` into `batch` (which keeps them, or hands them on in chunks).
    static func readFeatureCollection(_ data: Data, into batch: inout POIBatch) throws {
        var failure: (any Error)?
        let read: JSONParser.StreamedObject
        do throws(JSONParseError) {
            read = try JSONParser.parseObject(data, streaming: "features") { index, feature in
                do { try batch.checkRowLimit(line: index) } catch {
                    failure = error
                    return false
                }
                switch parseFeature(feature) {
                case .success(let (poi, _)):
                    do { try batch.add(poi) } catch {
                        failure = error
                        return false
                    }
                case .failure(let problem):
                    batch.reject(FeatureProblem(index: index, reason: problem.reason, value: problem.value))
                }
                return true
            }
        } catch {
            if let failure { throw failure }
            if error.message == JSONParser.StreamedObject.notAnObject {
                throw POIImportError.notAFeatureCollection(
                    "body must be a JSON object with \"type\": \"FeatureCollection\" and \"features\"")
            }
            throw POIImportError.notAFeatureCollection("not valid JSON: \(error.description)")
        }
        if let failure { throw failure }
        guard read.members["type"]?.stringValue == "FeatureCollection" || read.members["type"] == nil else {
            throw POIImportError.notAFeatureCollection("type must be \"FeatureCollection\"")
        }
        guard read.streamed else {
            let found = read.members["features"].map { ", found \($0.typeName)" } ?? " (it is missing)"
            throw POIImportError.notAFeatureCollection("features must be an array of GeoJSON Features\(found)")
        }
    }

    static func parseFeature(_ feature: JSONValue) -> Result<(POI, Double?), FeatureProblem> {
        func fail(_ reason: String) -> Result<(POI, Double?), FeatureProblem> {
            .failure(FeatureProblem(index: 0, reason: reason))
        }
        guard case .object(let properties)? = feature["properties"] else { return fail("properties must be an object") }
        guard case .array(let coordinates)? = feature["geometry"]?["coordinates"], coordinates.count >= 2,
            let lng = coordinates[0].lenientDouble, let lat = coordinates[1].lenientDouble
        else { return fail("geometry.coordinates must be [longitude, latitude]") }
        let coordinate = Coordinate(latitude: lat, longitude: lng)
        guard coordinate.isValid else {
            return .failure(
                FeatureProblem(
                    index: 0, reason: "coordinates are outside lng [-180, 180], lat [-90, 90]",
                    value: "[\(lng), \(lat)]"))
        }
        let storeId: String
        switch properties["store_id"] {
        case .string(let id) where !id.isEmpty: storeId = id
        case .int(let id): storeId = String(id)
        default: return fail("properties.store_id must be a non-empty string")
        }
        let address = properties["address"]
        let lines: [String]
        if case .array(let raw)? = address?["lines"] { lines = raw.compactMap(\.stringValue) } else { lines = [] }
        func strings(_ key: String) -> [String] {
            if case .array(let raw)? = properties[key] { return raw.compactMap(\.stringValue) }
            return []
        }
        let poi = POI(
            storeId: storeId,
            name: properties["name"]?.stringValue ?? "",
            coordinate: coordinate,
            address: POI.Address(
                lines: lines, countryCode: address?["country_code"]?.stringValue,
                city: address?["city"]?.stringValue, zipcode: address?["zipcode"]?.stringValue),
            types: strings("types"), tags: strings("tags"),
            contact: properties["contact"].flatMap { $0 == .null ? nil : $0 },
            userProperties: properties["user_properties"].flatMap { $0 == .null ? nil : $0 })
        return .success((poi, properties["distance"]?.lenientDouble))
    }
}

/// Why a POI import was refused as a whole.
public enum POIImportError: Error, Equatable, Sendable, CustomStringConvertible {
    case notAFeatureCollection(String)
    case csv(line: Int, reason: String)
    /// A column mapping that cannot be used.
    case mapping(String)
    /// The file has more rows than one import may hold.
    case tooManyRows(limit: Int, at: Int)

    public var description: String {
        switch self {
        case .notAFeatureCollection(let detail): "not a GeoJSON FeatureCollection: \(detail)"
        case .csv(let line, let reason): "CSV line \(line): \(reason)"
        case .mapping(let reason): "column mapping: \(reason)"
        case .tooManyRows(let limit, let at):
            "the file has more than \(limit) rows (stopped at \(at)); split it, or load it with enrichment-server import-pois in parts"
        }
    }
}
