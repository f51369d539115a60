import Synchronization

/// A circuit breaker for the way to one APNs peer (a credential and an environment).
///
/// Closed: deliveries are sent. An outage (no answer at all, or 500 / 503) opens it: nothing is sent until the
/// probe time, which backs off (`base`, doubled per failed probe, at most `cap`, with jitter so that nodes do not
/// probe together). At the probe time one batch goes (half open); an answer closes the circuit, another outage
/// opens it again with the next backoff. Deliveries that find it open wait, without using an attempt.
public final class APNsCircuit: Sendable {
    public enum State: String, Sendable {
        case closed
        case open
        case halfOpen = "half_open"
    }

    /// What a change of state means, for the log.
    public enum Change: Sendable, Equatable {
        /// It opened (or opened again after a failed probe); the next probe is at `probeAt`.
        case opened(failures: Int, probeAt: Double)
        /// It closed after `outage` seconds.
        case closed(outage: Double)
    }

    private struct Status {
        var state = State.closed
        /// Outages in a row (1 after the first).
        var failures = 0
        var probeAt = 0.0
        var openedAt = 0.0
        /// When the probing batch started (half open); another lane may probe if it has not ended in time.
        var probeStartedAt = 0.0
        /// Why it opened, in a phrase (the last outage's cause), while it is not closed.
        var cause: String?
    }

    public let base: Double
    public let cap: Double
    private let jitter: @Sendable () -> Double
    private let status = Mutex(Status())

    /// `jitter` returns a factor in 0.5...1 (random by default).
    public init(base: Double = 1, cap: Double = 30, jitter: @escaping @Sendable () -> Double = { .random(in: 0.5...1) })
    {
        self.base = max(0.001, base)
        self.cap = max(self.base, cap)
        self.jitter = jitter
    }

    public var state: State { status.withLock { $0.state } }

    /// Why it is open or half open (the last outage's cause, e.g. `credential refused: 403 InvalidProviderToken`);
    /// nil when closed.
    public var cause: String? { status.withLock { $0.state == .closed ? nil : $0.cause } }

    /// When deliveries that find the circuit open should be tried again.
    public var probeAt: Double { status.withLock { $0.probeAt } }

    /// When deliveries the circuit refused at `now` should be claimed again: at the probe time while it is open;
    /// while a probe is out (half open, its probe time already past), `base` later, so that they are not claimed,
    /// enriched and refused again and again until the probe's answer comes.
    public func retryAt(refusedAt now: Double) -> Double {
        status.withLock { status in
            status.state == .halfOpen ? max(status.probeAt, now + base) : max(status.probeAt, now)
        }
    }

    /// Whether a batch may be sent at `now`: always when closed; when open, once the probe time has come (the
    /// batch is the probe: the circuit is half open until its answers come); while a probe runs, not (unless it
    /// has run longer than `cap`, which means its lane died).
    public func allows(at now: Double) -> Bool {
        status.withLock { status in
            switch status.state {
            case .closed:
                return true
            case .open:
                guard now >= status.probeAt else { return false }
                status.state = .halfOpen
                status.probeStartedAt = now
                return true
            case .halfOpen:
                guard now - status.probeStartedAt > cap else { return false }
                status.probeStartedAt = now
                return true
            }
        }
    }

    /// An answer came from the peer (any status but 500 and 503): the way works.
    public func recordAnswer(at now: Double) -> Change? {
        status.withLock { status in
            guard status.state != .closed else { return nil }
            let outage = now - status.openedAt
            status = Status()
            return .closed(outage: outage)
        }
    }

    /// The way failed: opens the circuit (again), with the next probe after the backoff. `cause` says why, for
    /// readiness and the log.
    public func recordOutage(at now: Double, cause: String? = nil) -> Change? {
        status.withLock { status in
            if let cause { status.cause = cause }
            // Many answers of one batch report the same outage: only the first of an open period counts.
            if status.state == .open { return nil }
            if status.state == .closed { status.openedAt = now }
            status.failures += 1
            let delay = min(cap, base * pow2(status.failures - 1)) * min(1, max(0.5, jitter()))
            status.state = .open
            status.probeAt = now + delay
            return .opened(failures: status.failures, probeAt: status.probeAt)
        }
    }

    private func pow2(_ exponent: Int) -> Double {
        exponent >= 60 ? .infinity : Double(1 << max(0, exponent))
    }
}
