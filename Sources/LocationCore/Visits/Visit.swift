public import EnrichmentCore

/// A stay of a device at one place (docs/LOCATION-RULES.md §1): reported by the device or detected from its fixes.
public struct Visit: Sendable, Equatable {
    public var id: String
    public var deviceId: String
    /// Epoch seconds.
    public var arrival: Double
    /// Epoch seconds; always known for a stored visit (an arrival-only report is never stored).
    public var departure: Double
    public var latitude: Double
    public var longitude: Double
    public var horizontalAccuracy: Double
    /// When the service recorded it (the SDK's `date`, the capture time retention counts from).
    public var recordedAt: Double
    /// `reported` (POST) or `detected` (from fixes).
    public var source: String

    public init(
        id: String, deviceId: String, arrival: Double, departure: Double, latitude: Double, longitude: Double,
        horizontalAccuracy: Double, recordedAt: Double, source: String = "reported"
    ) {
        self.id = id
        self.deviceId = deviceId
        self.arrival = arrival
        self.departure = departure
        self.latitude = latitude
        self.longitude = longitude
        self.horizontalAccuracy = horizontalAccuracy
        self.recordedAt = recordedAt
        self.source = source
    }

    /// `dur(v)`: whole seconds, truncated (the SDK's `Date.seconds(from:)`).
    public var duration: Int { Int((departure - arrival).rounded(.towardZero)) }

    public var coordinate: Coordinate { Coordinate(latitude: latitude, longitude: longitude) }
}

/// The SDK's sentinel dates, epoch seconds.
public enum SDKDates {
    /// `Date.distantFuture`, 4001-01-01T00:00:00Z: an iOS arrival callback's departure.
    public static let distantFuture = 64_092_211_200.0
    /// `Date.distantPast`, 0001-01-01T00:00:00Z.
    public static let distantPast = -62_135_596_800.0
}
