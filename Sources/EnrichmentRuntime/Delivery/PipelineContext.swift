import Delivery
import Essentials
import Foundation
import Logging
import Synchronization

/// What every stage of the delivery pipeline shares: the stores, the settings, the clock, the log and the metrics,
/// the wake-ups between stages, and whether the pipeline is stopping. One value, copied into each stage.
struct PipelineContext: Sendable {
    let tokens: any DeviceTokenStore
    let outbox: any OutboxStore
    let settings: DeliverySettings
    let clock: any WallClock
    let logger: Logger
    let observer: (any DeliveryObserver)?
    /// Wake-ups between stages (deliveries committed, a push changed, work for the resolve or retain stage).
    let rendezvous: Rendezvous
    /// The name of this process in the store's claims and leases.
    let node: String
    /// Seconds a claim (of deliveries, or of an audience's resolution) holds before another node may take it.
    let lease: Double
    /// The bound on each call to a database across the network (nil: SQLite, in process).
    let databaseTimeout: Duration?
    let flags: PipelineFlags

    /// Lanes are woken: deliveries were committed, or some stay pending.
    static let wakeKey = "\u{0}wake"
    /// The callback loop looks for pushes whose callback is due.
    static let callbackKey = "\u{0}callbacks"
    /// The resolve stage looks for pushes still resolving.
    static let resolveKey = "\u{0}resolve"
    /// The retain stage looks for what to close, cancel or delete.
    static let retainKey = "\u{0}retain"

    /// The wall clock's now, in epoch seconds.
    var now: Double { clock.now().timeIntervalSince1970 }

    var isStopping: Bool { flags.isStopping || Task.isCancelled }

    /// A stage's call to the database, bounded by `databaseTimeout` (PostgreSQL): past it the call is left behind
    /// and the stage goes on (what it claimed is released, or its lease runs out), so a call that is never answered
    /// cannot stop delivery.
    func bounded<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let databaseTimeout else { return try await body() }
        guard let value = try await withAbandoningTimeout(databaseTimeout, body) else {
            logger.warning(
                "a database call did not answer in time; left behind",
                metadata: ["timeout": "\(databaseTimeout)"])
            throw DatabaseTimeout(timeout: databaseTimeout)
        }
        return value
    }
}

/// Whether the pipeline takes pushes and claims deliveries (both stop at `beginShutdown()`).
final class PipelineFlags: Sendable {
    private let accepting = Atomic<Bool>(true)
    private let stopping = Atomic<Bool>(false)

    var isAccepting: Bool { accepting.load(ordering: .relaxed) }
    var isStopping: Bool { stopping.load(ordering: .relaxed) }

    func stop() {
        accepting.store(false, ordering: .relaxed)
        stopping.store(true, ordering: .relaxed)
    }
}

/// Pushes cancelled through this node: a batch claimed before the cancel drops their deliveries before they go on
/// the wire (the send stage looks twice: when the batch is claimed, and once it is enriched).
final class CancelledPushes: Sendable {
    private let ids = Mutex<Set<String>>([])

    func insert(_ pushId: String) {
        ids.withLock { ids in
            if ids.count >= 1024 { ids.removeAll(keepingCapacity: true) }
            ids.insert(pushId)
        }
    }

    var snapshot: Set<String> { ids.withLock { $0 } }
}

/// Deliveries this node's lanes hold, by push: claimed and not yet recorded (a batch counts from its claim until its
/// last answer is written). A cancel on an embedded store waits for its push's to land, not for a query.
final class InFlightPushes: Sendable {
    private let held = Mutex<[String: Int]>([:])

    func add(_ claimed: [ClaimedDelivery]) {
        held.withLock { held in
            for claim in claimed { held[claim.pushId, default: 0] += 1 }
        }
    }

    func remove(_ claimed: [ClaimedDelivery]) {
        held.withLock { held in
            for claim in claimed {
                let left = held[claim.pushId, default: 0] - 1
                held[claim.pushId] = left > 0 ? left : nil
            }
        }
    }

    func count(_ pushId: String) -> Int { held.withLock { $0[pushId] ?? 0 } }
}
