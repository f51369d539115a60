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

/// Enrich-and-send: the delivery pipeline. Pushes are committed to the outbox, drained to APNs, and their tokens
/// kept clean, by stages of their own (docs/ARCHITECTURE.md draws them):
///
/// - resolve (`ResolveStage`): an audience becomes its devices, chunk by chunk, in the background;
/// - enqueue (`EnqueueStage`): devices become deliveries, planned (`EnqueuePlanner`) and committed;
/// - claim (`ClaimStage`): lanes claim due deliveries with a lease;
/// - enrich (`EnrichStage`): each device's payload is made at the moment it is sent;
/// - send (`SendStage`): settled where the planner says so, else handed to the APNs senders;
/// - record (`RecordStage`): answers written back, circuits told, tokens deactivated;
/// - retain (`RetainStage`): idle open pushes closed, cancelled deliveries swept, old pushes deleted.
///
/// Accepted means committed: `submit` writes the push and one delivery per active registration in one
/// transaction before it returns. A delivery whose result was not written before the process died is sent again
/// after a restart: at-least-once, with at most `lanes x concurrency` deliveries in that window. This class wires
/// the stages together, runs their loops, and is what the routes call.
public final class DeliveryEngine: Sendable {
    public let tokens: any DeviceTokenStore
    public let outbox: any OutboxStore
    public let settings: DeliverySettings
    /// The name of this process; each lane claims as `<node>-<lane>`, its second batch in flight as
    /// `<node>-<lane>-1`.
    public let node: String
    let context: PipelineContext
    let enqueue: EnqueueStage
    let resolve: ResolveStage
    let claim: ClaimStage
    let send: SendStage
    let retain: RetainStage
    /// True when one process owns the store (SQLite): claims left by a previous run are released at start.
    let exclusiveStore: Bool
    /// Concurrent claim-send-record loops.
    let lanes: Int
    let feedback: WebhookQueue?
    /// Posts pushes' reports to their callback URLs once final.
    let callbacks: PushCallbacks
    private let cancelledHere = CancelledPushes()
    private let inFlight = InFlightPushes()

    init(
        tokens: any DeviceTokenStore, outbox: any OutboxStore, activities: (any ActivityStore)? = nil,
        settings: DeliverySettings, enricher: Enricher, appEnrichers: [String: Enricher] = [:],
        senders: [SenderKey: any APNsBatchSending], clock: any WallClock, logger: Logger,
        observer: (any DeliveryObserver)?, exclusiveStore: Bool, lanes: Int = 2, batchSize: Int? = nil,
        lease: Double? = nil, pollInterval: Duration = .seconds(1), databaseTimeout: Duration? = nil,
        identities: [String: String] = [:]
    ) {
        self.tokens = tokens
        self.outbox = outbox
        self.settings = settings
        let node = "node-\(UUID().uuidString.prefix(8).lowercased())"
        self.node = node
        let context = PipelineContext(
            tokens: tokens, outbox: outbox, settings: settings, clock: clock, logger: logger, observer: observer,
            rendezvous: Rendezvous(), node: node, lease: lease ?? settings.lease, databaseTimeout: databaseTimeout,
            flags: PipelineFlags())
        self.context = context
        self.exclusiveStore = exclusiveStore
        self.lanes = max(1, lanes)
        let feedback = settings.feedbackURL.map { WebhookQueue(url: $0, name: "feedback", logger: logger) }
        self.feedback = feedback
        let planner = DeliveryPlanner(
            retry: RetryPolicy(
                maxAttempts: settings.attempts, baseDelay: settings.retryDelay, maxDelay: settings.maxRetryDelay),
            maximumAge: settings.maximumAge)
        let circuits = senders.mapValues { _ in
            APNsCircuit(base: settings.retryDelay, cap: max(settings.retryDelay, settings.probeInterval))
        }
        enqueue = EnqueueStage(context: context)
        resolve = ResolveStage(context: context, enqueue: enqueue)
        let record = RecordStage(
            context: context, activities: activities, planner: planner, circuits: circuits, identities: identities,
            feedback: feedback, spans: enricher.spans)
        send = SendStage(
            context: context, enrich: EnrichStage(context: context, enricher: enricher, appEnrichers: appEnrichers),
            record: record, senders: senders, planner: planner, cancelled: cancelledHere)
        let flightsPerLane = settings.concurrency >= 2 ? 2 : 1
        claim = ClaimStage(
            context: context, send: send, batchSize: batchSize ?? max(1, settings.concurrency / flightsPerLane),
            flightsPerLane: flightsPerLane, pollInterval: pollInterval, inFlight: inFlight)
        retain = RetainStage(context: context)
        self.callbacks = PushCallbacks(
            outbox: outbox, clock: clock, logger: logger, secret: settings.callbackSecret,
            hosts: settings.callbackHosts)
        _ = context.rendezvous.watch(PipelineContext.wakeKey)
        _ = context.rendezvous.watch(PipelineContext.callbackKey)
        _ = context.rendezvous.watch(PipelineContext.retainKey)
    }

    var logger: Logger { context.logger }
    var rendezvous: Rendezvous { context.rendezvous }

    /// True when APNs credentials are configured.
    public var isConfigured: Bool { !send.senders.isEmpty }

    /// Each environment's circuit: `closed` (sending), `open` (APNs unreachable, deliveries wait) or `half_open`.
    public var circuitStates: [String: String] {
        Dictionary(uniqueKeysWithValues: send.circuits.map { ($0.key.description, $0.value.state.rawValue) })
    }

    /// Why each circuit that is not closed opened (`credential refused: 403 InvalidProviderToken (team ..., key
    /// ...)`, `unreachable: ...`), by environment.
    public var circuitCauses: [String: String] {
        Dictionary(
            uniqueKeysWithValues: send.circuits.compactMap { key, circuit in
                circuit.cause.map { (key.description, $0) }
            })
    }

    /// False once shutdown began.
    public var isAccepting: Bool { context.flags.isAccepting }

    /// Throws unless the pipeline takes new pushes (credentials configured, not shutting down).
    private func accepting() throws {
        guard isConfigured else { throw DeliveryError.notConfigured }
        guard isAccepting else { throw DeliveryError.shuttingDown }
    }

    /// Commits a push and its deliveries (one per active registration of each device), then wakes a worker
    /// (`EnqueueStage.submit`: with `timing`, each device's send time is decided in its own zone).
    public func submit(
        _ push: PushDefinition, timing: SendTiming? = nil, defaultZone: String? = nil
    ) async throws -> Receipt {
        try accepting()
        return try await enqueue.submit(push, timing: timing, defaultZone: defaultZone)
    }

    /// Commits a push addressed to given tokens rather than to its devices' registrations (a Live Activity's own
    /// token).
    public func submit(_ push: PushDefinition, deliveries: [NewDelivery]) async throws -> Receipt {
        try accepting()
        return try await enqueue.submit(push, deliveries: deliveries)
    }

    /// Commits a push to an audience, resolved in the background by the resolve stage.
    public func submit(_ push: PushDefinition, audience: String, defaultZone: String?) async throws {
        try accepting()
        try await enqueue.submit(push, audience: audience, defaultZone: defaultZone)
    }

    /// Commits an open push: no device yet; `add` gives them.
    public func open(_ push: PushDefinition, defaultZone: String?) async throws {
        try accepting()
        try await enqueue.open(push, defaultZone: defaultZone)
    }

    /// Adds devices to an open push (and closes it when `close`).
    public func add(pushId: String, deviceIds: [String], close: Bool) async throws -> AddOutcome {
        try accepting()
        return try await enqueue.add(pushId: pushId, deviceIds: deviceIds, close: close)
    }

    /// Closes an open push: it is done once its deliveries are final. False when it was not open.
    public func close(pushId: String) async throws -> Bool {
        try await enqueue.close(pushId: pushId)
    }

    /// Sets what resolves audiences (the service does at start).
    public func resolveAudiences(with members: @escaping AudienceMembers) {
        resolve.resolveAudiences(with: members)
    }

    /// Waits until the push's audience is resolved, or `timeout`; returns its status then.
    public func waitUntilResolved(pushId: String, timeout: Duration) async throws -> PushStatus? {
        try await resolve.waitUntilResolved(pushId: pushId, timeout: timeout)
    }

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

    /// Runs the stages' loops (resolve, the lanes of claim, retain, callbacks, the feedback webhook) until
    /// `beginShutdown()` (the lanes finish what they claimed) or cancellation, then closes the APNs connections.
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
            group.addTask { await self.resolve.run() }
            group.addTask { await self.retain.run() }
            await withTaskGroup(of: Void.self) { lanes in
                for lane in 0..<self.lanes { lanes.addTask { await self.claim.run(lane: lane) } }
            }
            if let feedback {
                // The webhook gets a short grace to send what is queued, then stops.
                feedback.finish()
                try? await Task.sleep(for: .seconds(2))
            }
            group.cancelAll()
        }
        for sender in send.senders.values { try? await sender.shutdown() }
        logger.info("delivery stopped")
    }

    /// Stops taking pushes and claiming deliveries; claimed ones are finished and recorded, the rest stay committed
    /// for the next start.
    public func beginShutdown() {
        context.flags.stop()
        rendezvous.notify(PipelineContext.wakeKey)
    }

    /// Wakes the idle lanes: deliveries were committed (by this node, or by another as the change feed says).
    public func wake() { rendezvous.notify(PipelineContext.wakeKey) }

    /// Wakes whoever waits for the push to be done (its deliveries were cancelled).
    public func pushChanged(_ pushId: String) {
        rendezvous.notify(pushId)
        rendezvous.notify(PipelineContext.callbackKey)
    }

    /// The push was cancelled through this node: what this node claimed of it and did not send yet is not sent,
    /// and its pending deliveries are turned `cancelled` in the background (the retain stage).
    public func cancelled(_ pushId: String) {
        cancelledHere.insert(pushId)
        rendezvous.notify(PipelineContext.retainKey)
        pushChanged(pushId)
    }

    /// True when this process alone claims from the store (SQLite): what it holds in flight is all there is.
    public var ownsStore: Bool { exclusiveStore }

    /// Waits until this node holds none of the push's deliveries (every batch with one of them recorded), or
    /// `deadline`; returns how many it still holds then. On a store of its own (`ownsStore`) that is every
    /// delivery of the push that may still go out.
    public func waitUntilLanded(pushId: String, until deadline: ContinuousClock.Instant) async -> Int {
        var seen = rendezvous.watch(pushId)
        defer { rendezvous.unwatch(pushId) }
        while true {
            let held = inFlight.count(pushId)
            let left = deadline - ContinuousClock.now
            if held == 0 || left <= .zero { return held }
            _ = await rendezvous.wait(pushId, since: seen, timeout: left)
            seen = rendezvous.generation(pushId)
        }
    }

    /// Looks for pushes whose callback is due: when a batch of deliveries is recorded, when a push is accepted or
    /// cancelled, and every 5 s (another node's pushes, retries); one query per look.
    func callbackLoop() async {
        var failing = false
        while !context.isStopping {
            let seen = rendezvous.generation(PipelineContext.callbackKey)
            do {
                // A full page means more are due: look again at once.
                while try await callbacks.dispatchDue() == PushCallbacks.page, !context.isStopping {}
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
            _ = await rendezvous.wait(PipelineContext.callbackKey, since: seen, timeout: .seconds(5))
        }
    }
}
