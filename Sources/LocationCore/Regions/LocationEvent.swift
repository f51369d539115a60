public import Essentials

/// One event of a device, with the SDK's name (docs/LOCATION-RULES.md §6 Events).
public struct LocationEvent: Sendable, Equatable {
    public var deviceId: String
    /// `visit`, `region_enter`, `region_exit`, `zoi_enter` or `zoi_exit`.
    public var type: String
    /// The SDK's event name, e.g. `woos_geofence_entered_event`.
    public var name: String
    /// Epoch seconds: the fix time for region events, the processing time for visit and ZOI events.
    public var date: Double
    /// The event's own fields (visit fields, or region id, centre, radius, …).
    public var fields: [String: JSONValue]

    public init(deviceId: String, type: String, name: String, date: Double, fields: [String: JSONValue]) {
        self.deviceId = deviceId
        self.type = type
        self.name = name
        self.date = date
        self.fields = fields
    }

    public static let names: [String: String] = [
        "visit": "woos_visit_event",
        "region_enter": "woos_geofence_entered_event",
        "region_exit": "woos_geofence_exited_event",
        "zoi_enter": "woos_zoi_classified_entered_event",
        "zoi_exit": "woos_zoi_classified_exited_event",
    ]

    /// An event of `type` with its SDK name.
    public static func make(_ type: String, deviceId: String, date: Double, fields: [String: JSONValue])
        -> LocationEvent
    {
        LocationEvent(deviceId: deviceId, type: type, name: names[type] ?? type, date: date, fields: fields)
    }

    /// The JSON object of the event (fields flattened next to type, name, date).
    public var json: JSONValue {
        var object = fields
        object["type"] = .string(type)
        object["name"] = .string(name)
        object["date"] = .double(date)
        object["device_id"] = .string(deviceId)
        return .object(object)
    }
}
