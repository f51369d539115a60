/// The timestamp found in a payload (or why none was usable), and where it was found.
public struct TimestampReading: Sendable, Equatable {
    /// The place in the payload a timestamp came from.
    public enum Source: String, Sendable {
        /// `aps.timestamp` as a JSON integer (the SDK's only accepted form).
        case apsInteger = "aps.timestamp"
        /// `aps.timestamp` as a numeric string (default mode only).
        case apsString = "aps.timestamp(string)"
        /// `aps.timestamp` as a fractional number, floored (default mode only).
        case apsNumber = "aps.timestamp(number)"
        /// Top-level `timestamp` (the legacy README shape; default mode only).
        case legacyTopLevel = "timestamp"
    }

    /// Epoch seconds, or nil when no usable timestamp exists.
    public var timestamp: Int64?
    public var source: Source?
    /// Why no timestamp was usable, when `timestamp` is nil.
    public var problem: String?

    public init(timestamp: Int64?, source: Source?, problem: String?) {
        self.timestamp = timestamp
        self.source = source
        self.problem = problem
    }
}
