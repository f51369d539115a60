import Foundation

/// The staleness rules: stale iff `timestamp + window < floor(now)`; optionally reject far-future timestamps.
public struct StalenessPolicy: Sendable, Equatable {
    /// Seconds a payload stays fresh after its timestamp (the SDK uses 300).
    public var window: Int64
    /// When set, a timestamp more than this many seconds after `floor(now)` is rejected. Off in the SDK.
    public var maxFutureSkew: Int64?

    /// Creates a policy; the defaults are the SDK's.
    public init(window: Int64 = 300, maxFutureSkew: Int64? = nil) {
        self.window = window
        self.maxFutureSkew = maxFutureSkew
    }

    /// Judges a timestamp reading at the instant `now`.
    public func evaluate(_ reading: TimestampReading, now: Date) -> StalenessVerdict {
        let nowSeconds = Int64(floor(now.timeIntervalSince1970))
        guard let timestamp = reading.timestamp else {
            return StalenessVerdict(state: .noTimestamp, rule: .missingTimestamp, timestamp: nil, ageSeconds: nil,
                                    source: reading.source, detail: reading.problem)
        }
        let age = nowSeconds - timestamp
        // Overflow-safe form of `timestamp + window < now`.
        if age > window {
            return StalenessVerdict(state: .stale, rule: .olderThanWindow, timestamp: timestamp, ageSeconds: age,
                                    source: reading.source, detail: "timestamp + \(window) < \(nowSeconds)")
        }
        if let skew = maxFutureSkew, -age > skew {
            return StalenessVerdict(state: .stale, rule: .futureSkew, timestamp: timestamp, ageSeconds: age,
                                    source: reading.source, detail: "timestamp - \(skew) > \(nowSeconds)")
        }
        return StalenessVerdict(state: .fresh, rule: age < 0 ? .futureAccepted : .withinWindow, timestamp: timestamp,
                                ageSeconds: age, source: reading.source, detail: nil)
    }
}

/// The outcome of a staleness check, with the rule that decided it.
public struct StalenessVerdict: Sendable, Equatable, Codable {
    /// Fresh, stale, or no usable timestamp.
    public enum State: String, Sendable, Codable { case fresh, stale, noTimestamp = "no_timestamp" }
    /// Which rule fired.
    public enum Rule: String, Sendable, Codable {
        case withinWindow = "within_window"
        case futureAccepted = "future_accepted"
        case olderThanWindow = "older_than_window"
        case futureSkew = "future_skew"
        case missingTimestamp = "missing_timestamp"
    }

    public var state: State
    public var rule: Rule
    /// The timestamp that was read, epoch seconds.
    public var timestamp: Int64?
    /// `floor(now) - timestamp`; negative for a future timestamp.
    public var ageSeconds: Int64?
    /// Where the timestamp was read from.
    public var source: TimestampReading.Source?
    /// A human explanation (the comparison that fired, or why no timestamp was usable).
    public var detail: String?

    enum CodingKeys: String, CodingKey {
        case state, rule, timestamp, source, detail
        case ageSeconds = "age_seconds"
    }
}
