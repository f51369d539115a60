import EnrichmentCore
public import Essentials
import Foundation

/// The JSON documents the stores keep for ZOIs, regions, region states and events, shared by every backend so
/// a value reads back exactly as written (doubles are written shortest-round-trip).
public enum LocationCodec {
    /// A problem reading a stored document (a bug or a hand-edited row, never user input).
    public struct Problem: Error, CustomStringConvertible {
        public var description: String
    }

    static func double(_ value: JSONValue?, _ name: String) throws -> Double {
        guard let value, let number = value.lenientDouble else {
            throw Problem(description: "stored \(name) is not a number")
        }
        return number
    }

    static func doubles(_ value: JSONValue?, _ name: String) throws -> [Double] {
        guard case .array(let items)? = value else { throw Problem(description: "stored \(name) is not an array") }
        return try items.map { try double($0, name) }
    }

    static func string(_ value: JSONValue?) -> String? { value?.stringValue }

    static func decode(_ text: String) throws -> JSONValue { try JSONValue.decode(Data(text.utf8)) }

    // MARK: ZOIs

    public static func encode(_ zoi: ZoneOfInterest) -> String { String(decoding: zoi.jsonBytes, as: UTF8.self) }

    public static func zoi(_ text: String) throws -> ZoneOfInterest {
        let json = try decode(text)
        guard case .array(let ids)? = json["visit_ids"] else { throw Problem(description: "stored visit_ids") }
        return ZoneOfInterest(
            id: string(json["id"]) ?? "", meanX: try double(json["mean_x"], "mean_x"),
            meanY: try double(json["mean_y"], "mean_y"),
            inverse: try doubles(json["covariance_inverse"], "covariance_inverse"),
            det: try double(json["covariance_det"], "covariance_det"),
            prior: try double(json["prior_probability"], "prior_probability"),
            accumulator: try double(json["accumulator"], "accumulator"), age: try double(json["age"], "age"),
            visitIds: ids.compactMap(\.stringValue), startTime: try double(json["start_time"], "start_time"),
            endTime: try double(json["end_time"], "end_time"), duration: Int(try double(json["duration"], "duration")),
            weeklyDensity: try doubles(json["weekly_density"], "weekly_density"), period: string(json["period"]),
            wktPolygon: string(json["wkt_polygon"]) ?? "")
    }

    // MARK: Regions

    public static func json(_ region: Region) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(region.id), "latitude": .double(region.latitude), "longitude": .double(region.longitude),
            "radius": .double(region.radius), "policy": .string(region.policy.rawValue),
        ]
        if let ssid = region.wifiSSID { object["wifi_ssid"] = .string(ssid) }
        if let bssid = region.wifiBSSID { object["wifi_bssid"] = .string(bssid) }
        if let payload = region.pushPayload { object["push_payload"] = payload }
        if !region.extra.isEmpty { object["extra"] = .object(region.extra) }
        // A polygon region's vertices as [latitude, longitude] pairs; a region without them is a circle (as every
        // region stored before polygons is).
        if let polygon = region.polygon {
            object["polygon"] = .array(polygon.vertices.map { .array([.double($0.latitude), .double($0.longitude)]) })
        }
        return .object(object)
    }

    public static func encode(_ region: Region) -> String {
        String(decoding: JSONWriter.bytes(json(region)), as: UTF8.self)
    }

    public static func region(_ json: JSONValue) throws -> Region {
        var polygon: GeoPolygon?
        if case .array(let pairs)? = json["polygon"] {
            polygon = GeoPolygon(
                unchecked: try pairs.map { pair in
                    let numbers = try doubles(pair, "polygon vertex")
                    guard numbers.count == 2 else { throw Problem(description: "stored polygon vertex is not a pair") }
                    return Coordinate(latitude: numbers[0], longitude: numbers[1])
                })
        }
        return Region(
            id: string(json["id"]) ?? "", latitude: try double(json["latitude"], "latitude"),
            longitude: try double(json["longitude"], "longitude"), radius: try double(json["radius"], "radius"),
            wifiSSID: string(json["wifi_ssid"]), wifiBSSID: string(json["wifi_bssid"]),
            policy: Region.Policy(rawValue: string(json["policy"]) ?? "") ?? .either, pushPayload: json["push_payload"],
            extra: json["extra"]?.objectValue ?? [:], polygon: polygon)
    }

    public static func region(_ text: String) throws -> Region { try region(try decode(text)) }

    // MARK: Region state

    public static func encode(_ state: DeviceRegionState) -> String {
        var logs: [String: JSONValue] = [:]
        for (id, log) in state.logs { logs[id] = .array([.bool(log.didEnter), .double(log.date)]) }
        var object: [String: JSONValue] = ["poi_regions": .array(state.poiRegions.map(json)), "logs": .object(logs)]
        if let last = state.lastFixTime { object["last_fix_time"] = .double(last) }
        if let after = state.detectAfter { object["detect_after"] = .double(after) }
        return String(decoding: JSONWriter.bytes(.object(object)), as: UTF8.self)
    }

    public static func regionState(_ text: String) throws -> DeviceRegionState {
        let json = try decode(text)
        guard case .array(let regions)? = json["poi_regions"] else { throw Problem(description: "stored poi_regions") }
        var logs: [String: DeviceRegionState.Log] = [:]
        for (id, value) in json["logs"]?.objectValue ?? [:] {
            guard case .array(let pair) = value, pair.count == 2, case .bool(let enter) = pair[0] else { continue }
            logs[id] = DeviceRegionState.Log(didEnter: enter, date: try double(pair[1], "log date"))
        }
        return DeviceRegionState(
            poiRegions: try regions.map(region), logs: logs, lastFixTime: json["last_fix_time"]?.lenientDouble,
            detectAfter: json["detect_after"]?.lenientDouble)
    }

    // MARK: Events

    public static func encode(_ event: LocationEvent) -> String {
        String(decoding: JSONWriter.bytes(event.json), as: UTF8.self)
    }

    public static func event(_ text: String) throws -> LocationEvent {
        guard case .object(var fields) = try decode(text) else { throw Problem(description: "stored event") }
        let type = fields.removeValue(forKey: "type")?.stringValue ?? ""
        let name = fields.removeValue(forKey: "name")?.stringValue ?? ""
        let date = try double(fields.removeValue(forKey: "date"), "date")
        let device = fields.removeValue(forKey: "device_id")?.stringValue ?? ""
        return LocationEvent(deviceId: device, type: type, name: name, date: date, fields: fields)
    }
}
