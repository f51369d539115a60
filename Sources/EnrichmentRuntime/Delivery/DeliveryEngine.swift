import APNsCore
public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import Synchronization
import Tracing

/// What the delivery engine reports as it works (the service turns these into Prometheus metrics).
public protocol DeliveryObserver: Sendable {
    /// `count` attempts with the same result: the deliveries' new state, APNs's status and reason (a batch's answers
    /// are told once per distinct result).
    func attempts(_ count: Int, state: DeliveryState, status: Int?, reason: String?)
    /// Time from handing a push to the APNs client until its answer.
    func apnsLatency(_ duration: Duration)
    /// Pending deliveries in the outbox.
    func outboxDepth(_ depth: Int)
    /// HTTP/2 connections opened to an environment since the last report (first connects and reconnects).
    func connectionsOpened(_ count: Int, environment: String)
    /// A registration deactivated after an APNs answer.
    func deactivated(reason: String)
    /// `count` enrichments made for deliveries with the same outcome and places provider (the same outcomes
    /// `/v1/enrich` counts; once per batch and distinct pair).
    func enriched(_ count: Int, outcome: String, provider: String)
    /// The circuit to an environment's APNs peer changed state (`closed`, `open`, `half_open`).
    func circuit(environment: String, state: String)
    /// Deliveries that found an environment's circuit open or were lost to an outage in one batch, now waiting.
    func waitingForAPNs(_ count: Int, environment: String)
}

/// Why a push cannot be accepted.
public enum DeliveryError: Error, Sendable, CustomStringConvertible {
    /// No APNs credentials are configured.
    case notConfigured
    /// The service is shutting down and takes no new pushes.
    case shuttingDown

    public var description: String {
        switch self {
        case .notConfigured:
            "delivery is off: set ENRICH_APNS_KEY_FILE, ENRICH_APNS_KEY_ID and ENRICH_APNS_TEAM_ID (token "
                + "authentication) or ENRICH_APNS_CERT and ENRICH_APNS_CERT_KEY / ENRICH_APNS_P12 and restart"
        case .shuttingDown: "the service is shutting down and takes no new pushes; retry on another node or later"
        }
    }
}

/// Enrich-and-send: commits pushes to the outbox, drains it to APNs, and keeps token hygiene.
///
/// Accepted means committed: `submit` writes the push and one delivery per active registration in one
/// transaction before it returns. Lanes (workers) claim due deliveries with a lease, enrich each device's payload at
/// the moment of sending (so the staleness rule is judged then), send through one long-lived HTTP/2 client per APNs
/// environment, and write each result back. A delivery whose result was not written before the process died is
/// sent again after a restart: at-least-once, with at most `lanes x concurrency` deliveries in that window.
///
/// A lane does not wait for its batch's answers before it claims the next: once a batch is handed to the senders,
/// its answers are recorded by a task of their own while the lane claims and enriches the next batch (at most
/// `flightsPerLane` batches per lane between claim and last answer, each of `concurrency / flightsPerLane`
/// deliveries, so a lane has at most `concurrency` on the wire), so the database, the enrichment and the wire work
/// at the same time.
public final class DeliveryEngine: Sendable {
    public let tokens: any DeviceTokenStore
    public let outbox: any OutboxStore
    /// Live Activity tokens: one APNs says no longer works is marked invalid there.
    let activities: (any ActivityStore)?
    public let settings: DeliverySettings
    let enricher: Enricher
    /// Apps with their own enrichment settings: their deliveries are enriched with these.
    let appEnrichers: [String: Enricher]
    /// One sender per credential and APNs environment: the HTTP/2 client in service, any `APNsBatchSending` in a
    /// test.
    let senders: [SenderKey: any APNsBatchSending]
    let clock: any WallClock
    let logger: Logger
    let observer: (any DeliveryObserver)?
    let feedback: WebhookQueue?
    /// The name of this process; each lane claims as `<node>-<lane>`, its second batch in flight as
    /// `<node>-<lane>-1`.
    public let node: String
    /// True when one process owns the store (SQLite): claims left by a previous run are released at start.
    let exclusiveStore: Bool
    /// Concurrent claim-send-record loops, and deliveries each claims at once.
    let lanes: Int
    let batchSize: Int
    /// Batches a lane may have between their claim and their last answer recorded: the next is claimed and enriched
    /// while the answers of the one before are still coming.
    /// Two, unless the concurrency is 1 (then one batch of one).
    let flightsPerLane: Int
    /// Seconds a claim holds before another worker may take it.
    let lease: Double
    /// How often lane 0 looks for due work that no wake-up announced.
    let pollInterval: Duration
    /// The bound on each of a lane's calls to a database across the network (nil: SQLite, in process).
    let databaseTimeout: Duration?
    /// How often a lane writes the answers it got while a batch is still sending (the last answer is written at
    /// once).
    let recordInterval: Duration
    /// What becomes of each claimed delivery and each answer (no I/O: this class performs what it decides).
    let planner: DeliveryPlanner
    /// One circuit breaker per environment's peer: an outage pauses sending there until a probe gets an answer.
    let circuits: [SenderKey: APNsCircuit]
    /// Who each credential is to APNs (`team TEAM123456, key ABC1234567`, or `certificate`), by credential name,
    /// for the log and readiness when APNs refuses it. No secret: ids only.
    let identities: [String: String]

    let rendezvous = Rendezvous()
    private let accepting = Atomic<Bool>(true)
    private let stopping = Atomic<Bool>(false)
    private let pushCache = Mutex<[String: PushDefinition]>([:])
    private let lastConnections = Mutex<[SenderKey: Int]>([:])
    /// Resolves an audience (as the request gave it) in an app at an instant to its devices' stored keys: set by
    /// the service, which knows the places and regions an audience may name.
    let audienceMembers = Mutex<AudienceMembers?>(nil)
    /// Pushes cancelled through this node: a batch claimed before the cancel drops their deliveries before they go
    /// on the wire.
    let cancelledHere = Mutex<Set<String>>([])
    static let wakeKey = "\u{0}wake"
    static let callbackKey = "\u{0}callbacks"
    static let resolveKey = "\u{0}resolve"
    static let retainKey = "\u{0}retain"
    /// Posts pushes' reports to their callback URLs once final.
    let callbacks: PushCallbacks

    init(
        tokens: any DeviceTokenStore, outbox: any OutboxStore, activities: (any ActivityStore)? = nil,
        settings: DeliverySettings, enricher: Enricher, appEnrichers: [String: Enricher] = [:],
        senders: [SenderKey: any APNsBatchSending], clock: any WallClock, logger: Logger,
        observer: (any DeliveryObserver)?, exclusiveStore: Bool, lanes: Int = 2, batchSize: Int? = nil,
        lease: Double? = nil, pollInterval: Duration = .seconds(1), databaseTimeout: Duration? = nil,
        identities: [String: String] = [:]
    ) {
        self.identities = identities
        self.pollInterval = pollInterval
        self.databaseTimeout = databaseTimeout
        self.tokens = tokens
        self.outbox = outbox
        self.activities = activities
        self.settings = settings
        self.enricher = enricher
        self.appEnrichers = appEnrichers
        self.senders = senders
        self.clock = clock
        self.logger = logger
        self.observer = observer
        self.feedback = settings.feedbackURL.map { WebhookQueue(url: $0, name: "feedback", logger: logger) }
        self.node = "node-\(UUID().uuidString.prefix(8).lowercased())"
        self.exclusiveStore = exclusiveStore
        self.lanes = max(1, lanes)
        self.flightsPerLane = settings.concurrency >= 2 ? 2 : 1
        self.batchSize = batchSize ?? max(1, settings.concurrency / flightsPerLane)
        self.lease = lease ?? settings.lease
        self.recordInterval = .milliseconds(Int64(settings.recordInterval * 1000))
        self.planner = DeliveryPlanner(
            retry: RetryPolicy(
                maxAttempts: settings.attempts, baseDelay: settings.retryDelay, maxDelay: settings.maxRetryDelay),
            maximumAge: settings.maximumAge)
        self.circuits = senders.mapValues { _ in
            APNsCircuit(base: settings.retryDelay, cap: max(settings.retryDelay, settings.probeInterval))
        }
        self.callbacks = PushCallbacks(
            outbox: outbox, clock: clock, logger: logger, secret: settings.callbackSecret,
            hosts: settings.callbackHosts)
        _ = rendezvous.watch(Self.wakeKey)
        _ = rendezvous.watch(Self.callbackKey)
        _ = rendezvous.watch(Self.resolveKey)
        _ = rendezvous.watch(Self.retainKey)
    }

    /// True when APNs credentials are configured.
    public var isConfigured: Bool { !senders.isEmpty }

    /// Each environment's circuit: `closed` (sending), `open` (APNs unreachable, deliveries wait) or `half_open`.
    public var circuitStates: [String: String] {
        Dictionary(uniqueKeysWithValues: circuits.map { ($0.key.description, $0.value.state.rawValue) })
    }

    /// Why each circuit that is not closed opened (`credential refused: 403 InvalidProviderToken (team ..., key
    /// ...)`, `unreachable: ...`), by environment.
    public var circuitCauses: [String: String] {
        Dictionary(
            uniqueKeysWithValues: circuits.compactMap { key, circuit in circuit.cause.map { (key.description, $0) } })
    }

    /// False once shutdown began.
    public var isAccepting: Bool { accepting.load(ordering: .relaxed) }

    /// Waits until every delivery of the push is final, or `timeout`; returns whether they are.
    public func waitUntilDone(pushId: String, timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        var seen = rendezvous.watch(pushId)
        defer { rendezvous.unwatch(pushId) }
        while true {
            if try await outbox.pendingCount(pushId: pushId) == 0 { return true }
            let left = deadline - ContinuousClock.now
            if left <= .zero { return false }
            // Another node may send the push's deliveries (a shared store): nothing here is told when it does, so
            // look again every half second rather than only at the deadline.
            _ = await rendezvous.wait(
                pushId, since: seen, timeout: exclusiveStore ? left : min(left, .milliseconds(500)))
            seen = rendezvous.generation(pushId)
        }
    }

    /// Runs the workers until `beginShutdown()` (they finish what they claimed) or cancellation, then closes the
    /// APNs connections.
    public func run() async {
        guard isConfigured else { return }
        if exclusiveStore {
            do {
                let released = try await outbox.releaseClaims(owner: nil)
                if released > 0 {
                    logger.notice(
                        "deliveries claimed before a restart are sent again (at-least-once)",
                        metadata: ["count": "\(released)"])
                }
            } catch {
                logger.error("cannot release earlier claims", metadata: ["error": "\(error)"])
            }
        }
        await withTaskGroup(of: Void.self) { group in
            if let feedback {
                group.addTask { await feedback.run() }
            }
            group.addTask { await self.callbackLoop() }
            group.addTask { await self.resolveLoop() }
            group.addTask { await self.retainLoop() }
            await withTaskGroup(of: Void.self) { lanes in
                for lane in 0..<self.lanes { lanes.addTask { await self.lane(lane) } }
            }
            if let feedback {
                // The webhook gets a short grace to send what is queued, then stops.
                feedback.finish()
                try? await Task.sleep(for: .seconds(2))
            }
            group.cancelAll()
        }
        for sender in senders.values { try? await sender.shutdown() }
        logger.info("delivery stopped")
    }

    /// Stops taking pushes and claiming deliveries; claimed ones are finished and recorded, the rest stay committed
    /// for the next start.
    public func beginShutdown() {
        accepting.store(false, ordering: .relaxed)
        stopping.store(true, ordering: .relaxed)
        rendezvous.notify(Self.wakeKey)
    }

    var isStopping: Bool { stopping.load(ordering: .relaxed) || Task.isCancelled }

    /// Wakes the idle lanes: deliveries were committed (by this node, or by another as the change feed says).
    public func wake() { rendezvous.notify(Self.wakeKey) }

    /// Wakes whoever waits for the push to be done (its deliveries were cancelled).
    public func pushChanged(_ pushId: String) {
        rendezvous.notify(pushId)
        rendezvous.notify(Self.callbackKey)
    }

    /// The push was cancelled through this node: what this node claimed of it and did not send yet is not sent,
    /// and its pending deliveries are turned `cancelled` in the background.
    public func cancelled(_ pushId: String) {
        cancelledHere.withLock { cancelled in
            if cancelled.count >= 1024 { cancelled.removeAll(keepingCapacity: true) }
            cancelled.insert(pushId)
        }
        rendezvous.notify(Self.retainKey)
        pushChanged(pushId)
    }

    /// Looks for pushes whose callback is due: when a batch of deliveries is recorded, when a push is accepted or
    /// cancelled, and every 5 s (another node's pushes, retries); one query per look.
    func callbackLoop() async {
        var failing = false
        while !isStopping {
            let seen = rendezvous.generation(Self.callbackKey)
            do {
                // A full page means more are due: look again at once.
                while try await callbacks.dispatchDue() == PushCallbacks.page, !isStopping {}
                if failing { logger.notice("push callbacks resumed: the store answers again") }
                failing = false
            } catch {
                if !failing {
                    logger.warning(
                        "push callbacks wait: the store did not answer; they are tried again every 5 s",
                        metadata: ["error": "\(error)"])
                }
                failing = true
            }
            _ = await rendezvous.wait(Self.callbackKey, since: seen, timeout: .seconds(5))
        }
    }

    /// A lane's call to the database, bounded by `databaseTimeout` (PostgreSQL): past it the call is left behind
    /// and the lane goes on (what it claimed is released, or its lease runs out), so a call that is never answered
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

    func reportGauges() async {
        guard let observer else { return }
        if let depth = try? await bounded({ try await self.outbox.depth() }) { observer.outboxDepth(depth) }
        for (environment, sender) in senders {
            let opened = await sender.connectionsOpened()
            let delta = lastConnections.withLock { last in
                let delta = opened - last[environment, default: 0]
                last[environment] = opened
                return delta
            }
            if delta > 0 { observer.connectionsOpened(delta, environment: environment.description) }
        }
    }

    func definition(_ id: String) async throws -> PushDefinition? {
        if let cached = pushCache.withLock({ $0[id] }) { return cached }
        guard let push = try await bounded({ try await self.outbox.push(id: id) }) else { return nil }
        pushCache.withLock { cache in
            if cache.count >= 1024 { cache.removeAll(keepingCapacity: true) }
            cache[id] = push
        }
        return push
    }

}
