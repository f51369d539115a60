/// A wake-up for a follower of changes (other nodes' POIs, regions): `notify` when something changed, `wait` until
/// it did (or a timeout), missing none that came in between.
public final class ChangeSignal: Sendable {
    private let rendezvous = Rendezvous()
    private static let key = "change"

    public init() { _ = rendezvous.watch(Self.key) }

    public func notify() { rendezvous.notify(Self.key) }

    /// How many notifies so far: read it before reading the changes, then wait past it.
    public var generation: Int { rendezvous.generation(Self.key) }

    /// Waits until notified after `seen`, or `timeout`; true when notified.
    @discardableResult
    public func wait(since seen: Int, timeout: Duration) async -> Bool {
        await rendezvous.wait(Self.key, since: seen, timeout: timeout)
    }
}
