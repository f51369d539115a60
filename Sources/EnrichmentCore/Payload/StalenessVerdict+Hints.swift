extension StalenessVerdict {
    /// Timestamps above this are read as milliseconds by mistake: epoch seconds pass it only in the year 5138.
    public static let millisecondsThreshold: Int64 = 100_000_000_000

    /// What looks wrong in the input, in words a QA engineer can act on. The verdict itself is unchanged.
    public var hints: [String] {
        var hints: [String] = []
        if let timestamp, timestamp >= Self.millisecondsThreshold || timestamp <= -Self.millisecondsThreshold {
            hints.append(
                "the timestamp \(timestamp) looks like milliseconds; APNs payload timestamps are epoch seconds "
                    + "(\(timestamp / 1000) here)")
        }
        if state == .noTimestamp, let detail, detail.contains("unfilled placeholder") {
            hints.append(detail)
        }
        if let age = ageSeconds, age < 0 {
            hints.append(
                "the timestamp is \(-age) s after the evaluation time: check the sender's clock, or the time you "
                    + "evaluated at")
        }
        return hints
    }
}
