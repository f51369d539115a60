public import Foundation

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

    /// The instants a verdict can be asked for: epoch seconds from 0 (1970-01-01T00:00:00Z) to 253402300799
    /// (9999-12-31T23:59:59Z). Request handlers refuse an `at` outside it with the range in the message.
    public static let evaluableSeconds: ClosedRange<Double> = 0...253_402_300_799

    /// Judges a timestamp reading at the instant `now`.
    ///
    /// Every `Int64` timestamp gets a verdict: the comparisons are made in 128-bit arithmetic, so no timestamp,
    /// window or skew can overflow. `now` outside `evaluableSeconds` is clamped into it (callers validate first).
    public func evaluate(_ reading: TimestampReading, now: Date) -> StalenessVerdict {
        let nowSeconds = Self.flooredSeconds(now)
        guard let timestamp = reading.timestamp else {
            return StalenessVerdict(
                state: .noTimestamp, rule: .missingTimestamp, timestamp: nil, ageSeconds: nil,
                source: reading.source, detail: reading.problem)
        }
        let age = Int128(nowSeconds) - Int128(timestamp)
        // The age is reported when it fits in 64 bits (it does unless the timestamp is within about 2^63 s of
        // Int64.min); the verdict itself never depends on that.
        let reportedAge = Int64(exactly: age)
        if age > Int128(window) {
            return StalenessVerdict(
                state: .stale, rule: .olderThanWindow, timestamp: timestamp, ageSeconds: reportedAge,
                source: reading.source, detail: "timestamp + \(window) < \(nowSeconds)")
        }
        if let skew = maxFutureSkew, -age > Int128(skew) {
            return StalenessVerdict(
                state: .stale, rule: .futureSkew, timestamp: timestamp, ageSeconds: reportedAge,
                source: reading.source, detail: "timestamp - \(skew) > \(nowSeconds)")
        }
        return StalenessVerdict(
            state: .fresh, rule: age < 0 ? .futureAccepted : .withinWindow, timestamp: timestamp,
            ageSeconds: reportedAge, source: reading.source, detail: nil)
    }

    /// `floor(now)` in whole epoch seconds, clamped into `evaluableSeconds` (NaN counts as 0).
    static func flooredSeconds(_ now: Date) -> Int64 {
        let seconds = now.timeIntervalSince1970.rounded(.down)
        guard seconds >= evaluableSeconds.lowerBound else { return Int64(evaluableSeconds.lowerBound) }
        guard seconds <= evaluableSeconds.upperBound else { return Int64(evaluableSeconds.upperBound) }
        return Int64(seconds)
    }
}

/// The outcome of a staleness check, with the rule that decided it.
public struct StalenessVerdict: Sendable, Equatable {
    /// Fresh, stale, or no usable timestamp.
    public enum State: String, Sendable {
        case fresh, stale
        case noTimestamp = "no_timestamp"
    }
    /// Which rule fired.
    public enum Rule: String, Sendable {
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
}
