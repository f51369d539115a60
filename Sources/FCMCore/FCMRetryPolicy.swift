import Foundation

/// How long to wait before sending a message again, as Google asks: at least `Retry-After` when FCM gives one (never
/// shortened), else exponential backoff from `initialBackoff` (QUOTA_EXCEEDED without `Retry-After` waits at least
/// `quotaBackoff`, Google's one minute) up to `maximumBackoff`, and at most `maximumAttempts` sends.
public struct FCMRetryPolicy: Sendable, Equatable {
    public var maximumAttempts: Int
    /// Seconds before the second attempt; doubled for each one after.
    public var initialBackoff: Double
    public var maximumBackoff: Double
    /// The least wait after a 429 that did not say how long.
    public var quotaBackoff: Double

    public init(
        maximumAttempts: Int = 5, initialBackoff: Double = 1, maximumBackoff: Double = 60, quotaBackoff: Double = 60
    ) {
        self.maximumAttempts = maximumAttempts
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.quotaBackoff = quotaBackoff
    }

    /// Seconds to wait after attempt number `attempt` (1-based) was answered `status`, or nil when no attempt is
    /// left. `retryAfter` is the answer's `Retry-After` in seconds, when it had one.
    public func delay(afterAttempt attempt: Int, status: Int?, retryAfter: Double?) -> Double? {
        guard attempt < maximumAttempts else { return nil }
        if let retryAfter, retryAfter >= 0 { return retryAfter }
        let exponential = initialBackoff * Double(1 << min(max(attempt - 1, 0), 20))
        let floor = status == 429 ? quotaBackoff : 0
        return min(max(exponential, floor), maximumBackoff)
    }

    /// `Retry-After` as seconds: a number of seconds, or an HTTP date relative to `now` (epoch seconds).
    public static func retryAfterSeconds(_ header: String?, now: Double) -> Double? {
        guard let header = header?.trimmingCharacters(in: .whitespaces), !header.isEmpty else { return nil }
        if let seconds = Double(header), seconds.isFinite { return max(0, seconds) }
        return HTTPDate.parse(header).map { max(0, $0 - now) }
    }
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only date form `Retry-After` senders use today.
enum HTTPDate {
    static func parse(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]) else {
            return nil
        }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(of: String(parts[2])) else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        guard time.count == 3 else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm), so no calendar or locale is involved.
        let month = monthIndex + 1
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Double(days * 86_400 + time[0] * 3600 + time[1] * 60 + time[2])
    }
}
