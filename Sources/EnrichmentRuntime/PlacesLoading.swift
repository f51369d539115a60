public import EnrichmentCore
import Foundation
public import Logging
import Synchronization

/// The places index loading in the background at start-up (docs/OPERATIONS.md, "Start-up"): the service listens
/// at once, `/health/ready` says `places_loading` until the index is in, and requests that need it wait for it.
public final class PlacesLoading: Sendable {
    enum Phase: Sendable {
        case loading(since: ContinuousClock.Instant, problem: String?)
        case loaded(seconds: Double)
    }

    let phase: Mutex<Phase>

    public init(loaded: Bool) {
        phase = Mutex(loaded ? .loaded(seconds: 0) : .loading(since: .now, problem: nil))
    }

    public var isLoaded: Bool {
        phase.withLock {
            if case .loaded = $0 { return true }
            return false
        }
    }

    /// Nil once loaded; else what is happening ("loading for 1.2 s", or the last error of a read being retried).
    public var problem: String? {
        phase.withLock { phase -> String? in
            guard case .loading(let since, let problem) = phase else { return nil }
            let so = String(format: "%.1f", Self.seconds(since: since))
            return problem.map { "the places index could not be read (\($0)); retrying, \(so) s since start-up" }
                ?? "the places index is loading (\(so) s so far)"
        }
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Waits until the index is loaded or `timeout` passes; returns whether it is loaded.
    public func wait(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !isLoaded {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Reads the store into `index` until it succeeds (a read that fails is retried each second, with an error
    /// logged), then marks the index loaded.
    public func run(store: any POIStore, index: PlacesIndex, logger: Logger) async {
        let started = ContinuousClock.now
        while !Task.isCancelled {
            do {
                let builder = try await store.indexBuilder()
                let read = Self.seconds(since: started)
                index.load(builder)
                let seconds = Self.seconds(since: started)
                phase.withLock { $0 = .loaded(seconds: seconds) }
                logger.info(
                    "places index ready",
                    metadata: [
                        "pois": "\(index.count)", "seconds": "\(String(format: "%.2f", seconds))",
                        "read_seconds": "\(String(format: "%.2f", read))",
                    ])
                return
            } catch {
                phase.withLock { phase in
                    if case .loading(let since, _) = phase { phase = .loading(since: since, problem: "\(error)") }
                }
                logger.error(
                    "the places index could not be read; retrying in 1 s", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}
