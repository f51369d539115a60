/// When to send a push again: never for permanent reasons, with exponential backoff for 429 and 5xx.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, including the first.
    public var maxAttempts: Int
    /// Delay before the second attempt, in seconds; doubled for each further one.
    public var baseDelay: Double
    /// Longest delay between attempts, in seconds.
    public var maxDelay: Double

    public init(maxAttempts: Int = 3, baseDelay: Double = 0.5, maxDelay: Double = 8) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// Whether an answer is worth retrying at all (by status and reason, ignoring the attempt count).
    public static func isRetryable(status: Int, reason: APNsReason?) -> Bool {
        if let reason, reason.isPermanent { return false }
        return status == 429 || (500...599).contains(status)
    }

    /// The delay before attempt `attempt + 1` after attempt `attempt` (1-based) got this answer, or nil to stop.
    public func delay(afterAttempt attempt: Int, status: Int, reason: APNsReason?) -> Double? {
        guard attempt < maxAttempts, Self.isRetryable(status: status, reason: reason) else { return nil }
        return backoff(afterAttempt: attempt)
    }

    /// The delay after a transport failure (connection refused, reset, timeout), or nil to stop.
    public func delayAfterTransportError(attempt: Int) -> Double? {
        guard attempt < maxAttempts else { return nil }
        return backoff(afterAttempt: attempt)
    }

    /// The exponential backoff itself: `baseDelay` after the first attempt, doubled after each further one, at
    /// most `maxDelay`; the one place it is computed.
    public func backoff(afterAttempt attempt: Int) -> Double {
        var delay = baseDelay
        for _ in 1..<max(1, attempt) {
            delay *= 2
            if delay >= maxDelay { break }
        }
        return min(delay, maxDelay)
    }
}
