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
    private func callbackLoop() async {
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

    /// One claim-send-record loop. Lane 0 keeps watch when there is no work: one look per `pollInterval` at when the
    /// next delivery is due (one query), claiming when one is; the other lanes sleep until woken (a commit here, a
    /// notification from another node, or lane 0 finding more than it can take).
    private func lane(_ index: Int) async {
        var lastDepthReport = ContinuousClock.now - .seconds(10)
        var probe = false
        // Each batch in flight claims under its own owner (`<node>-<lane>` then `<node>-<lane>-<slot>`), so a
        // failure releases that batch's claims and not those of the batch beside it, which may be on the wire.
        await withTaskGroup(of: Int.self) { flights in
            var freeSlots = Array((0..<flightsPerLane).reversed())
            while !isStopping {
                if freeSlots.isEmpty, let slot = await flights.next() { freeSlots.append(slot) }
                let seen = rendezvous.generation(Self.wakeKey)
                if probe {
                    // Idle: look at when the next delivery is due before claiming.
                    let now = clock.now().timeIntervalSince1970
                    let due = try? await bounded { try await self.outbox.nextDue() }
                    if index > 0 || due.map({ $0 > now }) ?? true {
                        var wait = index > 0 ? Duration.seconds(60) : pollInterval
                        if index == 0, let due {
                            wait = min(wait, .milliseconds(Int64(max(0.005, due - now) * 1000)))
                        }
                        // Woken: claim at once; timed out: look again (lane 0) or sleep on (the others).
                        probe = !(await rendezvous.wait(Self.wakeKey, since: seen, timeout: wait))
                        continue
                    }
                }
                // Woken by a batch's end after `beginShutdown()`: no new claim.
                if isStopping { break }
                let slot = freeSlots.removeLast()
                let owner = slot == 0 ? "\(node)-\(index)" : "\(node)-\(index)-\(slot)"
                var claimed: [ClaimedDelivery] = []
                do {
                    let claimStarted = ContinuousClock.now
                    let (limit, now, lease) = (batchSize, clock.now().timeIntervalSince1970, self.lease)
                    claimed = try await bounded {
                        try await self.outbox.claim(owner: owner, limit: limit, now: now, lease: lease)
                    }
                    if !claimed.isEmpty {
                        logger.debug(
                            "claimed",
                            metadata: ["count": "\(claimed.count)", "took": "\(ContinuousClock.now - claimStarted)"])
                    }
                } catch {
                    await recover(from: error, claimed: claimed, owner: owner)
                }
                // A full claim means more is waiting: the other lanes help.
                if claimed.count == batchSize { rendezvous.notify(Self.wakeKey) }
                if claimed.isEmpty {
                    freeSlots.append(slot)
                } else {
                    // The batch is enriched and handed to the senders in a task of its own; the lane goes on once
                    // it is on its way (or failed), and its answers are recorded meanwhile.
                    let (handedOff, handOff) = AsyncStream<Void>.makeStream()
                    let batch = claimed
                    flights.addTask {
                        defer { handOff.finish() }
                        var leftPending = true
                        do {
                            leftPending = try await self.enricher.spans.run("delivery.batch") { span in
                                span?.attributes["delivery.count"] = batch.count
                                return try await self.process(batch, owner: owner, handedOff: { handOff.finish() })
                            }
                        } catch {
                            await self.recover(from: error, claimed: batch, owner: owner)
                        }
                        // The lane may have looked for work while this batch was out, and found its deliveries
                        // leased: those that stay pending (retries, waits for APNs, claims released after a
                        // failure) are looked for again now.
                        if leftPending { self.rendezvous.notify(Self.wakeKey) }
                        return slot
                    }
                    for await _ in handedOff {}
                }
                if index == 0, ContinuousClock.now - lastDepthReport > .seconds(5) {
                    lastDepthReport = ContinuousClock.now
                    await reportGauges()
                }
                probe = claimed.isEmpty
            }
        }
    }

    /// After a lane's failure: what `owner` claimed and did not record can be claimed again at once. The failure is
    /// often the database itself, so the release is tried again until it goes through (else the claims would wait
    /// out their whole lease once the database is back), within the lease. A claim left behind at the bound may
    /// still commit: its rows are released too.
    private func recover(from error: any Error, claimed: [ClaimedDelivery], owner: String) async {
        logger.error("delivery worker failed; retrying", metadata: ["error": "\(error)"])
        if !claimed.isEmpty || error is DatabaseTimeout {
            let giveUp = ContinuousClock.now + .milliseconds(Int64(lease * 1000))
            while (try? await bounded({ try await self.outbox.releaseClaims(owner: owner) })) == nil,
                ContinuousClock.now < giveUp,
                !Task.isCancelled
            {
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        try? await Task.sleep(for: .milliseconds(500))
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

    private func reportGauges() async {
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

    private func definition(_ id: String) async throws -> PushDefinition? {
        if let cached = pushCache.withLock({ $0[id] }) { return cached }
        guard let push = try await bounded({ try await self.outbox.push(id: id) }) else { return nil }
        pushCache.withLock { cache in
            if cache.count >= 1024 { cache.removeAll(keepingCapacity: true) }
            cache[id] = push
        }
        return push
    }

    /// The answers of one round of sends, as they arrive: each one is added and the lane is woken (no polling);
    /// the stream ends when every send has its answer.
    private final class Answers: Sendable {
        let items = Mutex<[(Attempt, APNsSendResult, Duration)]>([])
        let arrivals: AsyncStream<Void>
        private let continuation: AsyncStream<Void>.Continuation
        /// Notified once every send has its answer.
        private let allIn = Rendezvous()
        private static let done = "done"

        init() {
            (arrivals, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
            _ = allIn.watch(Self.done)
        }

        func add(_ answer: (Attempt, APNsSendResult, Duration)) {
            items.withLock { $0.append(answer) }
            continuation.yield()
        }

        func finish() {
            allIn.notify(Self.done)
            continuation.finish()
        }

        /// True when no answer waits to be taken.
        var isEmpty: Bool { items.withLock { $0.isEmpty } }

        /// Returns at `deadline`, or as soon as every send has its answer if that comes first.
        func waitForAll(until deadline: ContinuousClock.Instant) async {
            _ = await allIn.wait(Self.done, since: 0, timeout: deadline - ContinuousClock.now)
        }

        func take() -> [(Attempt, APNsSendResult, Duration)] {
            items.withLock { items in
                defer { items.removeAll(keepingCapacity: true) }
                return items
            }
        }
    }

    /// One prepared attempt. A class: an attempt goes from the batch to the sender's answer to the record, and each
    /// of those copies is one reference, not one per string of the delivery and the request.
    private final class Attempt: Sendable {
        let claim: ClaimedDelivery
        /// The credential and environment that send it.
        let key: SenderKey
        let request: APNsRequest
        let verdict: DeliveryPlanner.Verdict
        /// After this instant the delivery is not sent any more (`DeliveryPlanner.deadline`).
        let deadline: Double

        init(
            claim: ClaimedDelivery, key: SenderKey, request: APNsRequest, verdict: DeliveryPlanner.Verdict,
            deadline: Double
        ) {
            self.claim = claim
            self.key = key
            self.request = request
            self.verdict = verdict
            self.deadline = deadline
        }
    }

    /// Enriches each claimed device once, sends every claimed delivery, and records the results.
    ///
    /// `handedOff` is called once every attempt is with its sender (before the answers come back). Returns whether
    /// any delivery of the batch is still pending (to be retried, or waiting for APNs).
    private func process(
        _ claimed: [ClaimedDelivery], owner: String, handedOff: @escaping @Sendable () -> Void
    ) async throws -> Bool {
        let started = ContinuousClock.now
        let now = clock.now().timeIntervalSince1970
        var updates: [DeliveryUpdate] = []
        var outcomes: [(pushId: String, outcome: DeviceOutcome)] = []
        var attempts: [SenderKey: [Attempt]] = [:]
        let groups = DeliveryPlanner.groups(claimed)
        // Every device's last fix in one read, so enriching the batch makes no trip to storage per device.
        let deviceIds = claimed.map(\.delivery.deviceId)
        let prefetched = PrefetchedFixes(
            try await bounded { try await self.enricher.fixes.latestFixes(deviceIds: deviceIds) })
        var pushes: [String: PushDefinition] = [:]
        var unreadable: [String: String] = [:]
        for id in Set(claimed.map(\.pushId)) {
            do {
                // A push with timing (scheduled, held): "{{now}}" in its payload is the time each copy is sent.
                pushes[id] = try await definition(id).map { push in
                    guard push.plan != nil else { return push }
                    var push = push
                    push.payload = PayloadStamp.stamp(push.payload, now: Int64(now))
                    return push
                }
            } catch let error as StoredValueError {
                // One push that cannot be read fails its own deliveries, not the batch (which would be claimed
                // again and again).
                unreadable[id] = "the push cannot be read: \(error)"
            }
        }
        var work: [(group: Int, push: PushDefinition, deviceId: String)] = []
        let cancelledHere = self.cancelledHere.withLock { $0 }
        for (index, claims) in groups.enumerated() {
            // A push cancelled after these were committed: they are not sent.
            if claims[0].cancelled || cancelledHere.contains(claims[0].pushId) {
                updates += claims.map { Self.cancelledUpdate($0, at: now) }
                continue
            }
            if let problem = unreadable[claims[0].pushId] {
                updates += claims.map {
                    DeliveryUpdate(id: $0.id, state: .failed, attempts: $0.attempts, error: problem, finishedAt: now)
                }
                continue
            }
            switch planner.decide(claims, push: pushes[claims[0].pushId], now: now) {
            case .settle(let settled): updates += settled
            case .send(let push): work.append((index, push, claims[0].delivery.deviceId))
            }
        }
        // The contexts (location intelligence) of the devices to be enriched with a fix, in one look too, as an
        // enrichment reads a context only with a usable fix; a nicety: a look that fails leaves them unknown (each
        // enrichment then reads its own, and a failure there never fails it).
        var contexts: PrefetchedContexts?
        if let provider = enricher.contexts {
            let wanted = work.filter { $0.push.enrich && prefetched.has($0.deviceId) }.map(\.deviceId)
            do {
                contexts = PrefetchedContexts(try await bounded { try await provider.contexts(deviceIds: wanted) })
            } catch {
                logger.debug("device contexts not read for the batch", metadata: ["error": "\(error)"])
            }
        }
        let batchEnricher = enricher.forDelivery(fixes: prefetched, contexts: contexts)
        // An app with its own enrichment settings: the same prefetched fixes, its templates and places search.
        let batchApps = appEnrichers.mapValues { $0.forDelivery(fixes: prefetched, contexts: contexts) }
        let preparedByGroup = await prepareAll(work, with: batchEnricher, apps: batchApps)
        if let observer {
            var tally: [EnrichmentResultKey: Int] = [:]
            for case .success(let prepared) in preparedByGroup.values {
                guard let provider = prepared.provider else { continue }
                tally[EnrichmentResultKey(outcome: prepared.verdict.outcome, provider: provider), default: 0] += 1
            }
            for (key, count) in tally { observer.enriched(count, outcome: key.outcome, provider: key.provider) }
        }
        for (index, push, deviceId) in work {
            let claims = groups[index]
            let prepared: Prepared
            switch preparedByGroup[index] {
            case .success(let value)?:
                prepared = value
            case .failure(let error)?:
                updates += claims.map {
                    DeliveryUpdate(
                        id: $0.id, state: .failed, attempts: $0.attempts, error: "\(error)", finishedAt: now)
                }
                continue
            case nil:
                continue
            }
            outcomes.append(
                (
                    push.id,
                    DeviceOutcome(deviceId: deviceId, outcome: prepared.verdict.outcome, rule: prepared.verdict.rule)
                ))
            for claim in claims {
                switch planner.prepare(claim, push: push, payload: prepared.bytes, verdict: prepared.verdict, now: now)
                {
                case .settle(let update): updates.append(update)
                case .send(let request):
                    // The app's credential sends it: the app whose bundle id is the topic (or the default one).
                    let topic = push.topic ?? claim.delivery.topic
                    guard let key = settings.senderKey(topic: topic, environment: claim.delivery.environment) else {
                        updates.append(
                            DeliveryUpdate(
                                id: claim.id, state: .failed, attempts: claim.attempts,
                                error: settings.noCredentialMessage(topic: topic), outcome: prepared.verdict.outcome,
                                rule: prepared.verdict.rule, finishedAt: now))
                        continue
                    }
                    attempts[key, default: []].append(
                        Attempt(
                            claim: claim, key: key, request: request, verdict: prepared.verdict,
                            deadline: planner.deadline(of: push, scheduledAt: claim.delivery.scheduledAt)))
                }
            }
        }

        // A peer whose circuit is open is not sent to: its deliveries wait for the next probe, no attempt used.
        for (environment, batch) in attempts {
            guard let circuit = circuits[environment], !circuit.allows(at: now) else { continue }
            attempts[environment] = nil
            let retryAt = circuit.retryAt(refusedAt: now)
            updates += batch.map {
                planner.wait($0.claim, verdict: $0.verdict, result: nil, until: retryAt, deadline: $0.deadline, at: now)
            }
            observer?.waitingForAPNs(batch.count, environment: environment.description)
        }
        // A cancel that came while the batch was enriched: its deliveries do not go on the wire.
        let cancelledNow = self.cancelledHere.withLock { $0 }
        if cancelledNow != cancelledHere {
            for (environment, batch) in attempts {
                let (dropped, kept) = (
                    batch.filter { cancelledNow.contains($0.claim.pushId) },
                    batch.filter { !cancelledNow.contains($0.claim.pushId) }
                )
                guard !dropped.isEmpty else { continue }
                attempts[environment] = kept
                updates += dropped.map { Self.cancelledUpdate($0.claim, at: now) }
            }
        }
        let pushOf = Dictionary(claimed.map { ($0.id, $0.pushId) }, uniquingKeysWith: { first, _ in first })

        let prepared = ContinuousClock.now
        let sent = Answers()
        let senders = self.senders
        let concurrency = settings.concurrency
        let spans = enricher.spans
        async let allSent: Void = withTaskGroup(of: Void.self) { group in
            for (environment, batch) in attempts {
                guard let sender = senders[environment] else { continue }
                group.addTask {
                    let started = ContinuousClock.now
                    await spans.run("apns.send", kind: .client) { span in
                        span?.attributes["apns.environment"] = environment.environment.rawValue
                        span?.attributes["apns.credential"] = environment.credential
                        span?.attributes["apns.pushes"] = batch.count
                        await sender.send(batch.map(\.request), concurrency: concurrency) { index, result in
                            sent.add((batch[index], result, ContinuousClock.now - started))
                        }
                    }
                }
            }
            handedOff()
            await group.waitForAll()
            sent.finish()
        }
        // The first write carries the outcomes and the deliveries settled without sending (expired, refused
        // locally). Then answers are written as they arrive: the lane wakes on each arrival, takes every answer
        // waiting, and writes them in one transaction, at most once per `recordInterval` (answers that come while
        // a write is under way wait for the next), so a crash resends only what was on the wire or answered in
        // the last interval, not the whole batch. The batch's last answer is written at once: the batch holds its
        // slot (the lane's next claim) until it is recorded.
        var pending = try await record([], settled: updates, outcomes: outcomes, owner: owner, pushOf: pushOf)
        var recorded = 0
        var lastWrite = ContinuousClock.now
        for await _ in sent.arrivals {
            // A wake-up left from answers already written: nothing to do.
            if sent.isEmpty { continue }
            // Wait out the interval, unless the last answer comes first: then it is written at once, and the
            // batch's slot is free for the next claim.
            let due = lastWrite + recordInterval
            if ContinuousClock.now < due { await sent.waitForAll(until: due) }
            let answers = sent.take()
            guard !answers.isEmpty else { continue }
            pending += try await record(answers, settled: [], outcomes: [], owner: owner, pushOf: pushOf)
            recorded += answers.count
            lastWrite = ContinuousClock.now
        }
        // Every send has its answer once `allSent` is done (the wake-ups also end early if this task is
        // cancelled): then what arrived after the last wake-up is written too, so no answer is left unrecorded.
        await allSent
        let rest = sent.take()
        if !rest.isEmpty {
            pending += try await record(rest, settled: [], outcomes: [], owner: owner, pushOf: pushOf)
            recorded += rest.count
        }
        for pushId in Set(claimed.map(\.pushId)) { rendezvous.notify(pushId) }
        // A push can only have asked for a callback where callbacks are on: elsewhere a batch costs no look (the
        // 5 s look still finds any left from before they were turned off).
        if !settings.callbackHosts.isEmpty { rendezvous.notify(Self.callbackKey) }
        logger.debug(
            "batch done",
            metadata: [
                "deliveries": "\(claimed.count)", "sent": "\(recorded)", "prepare": "\(prepared - started)",
                "send_and_record": "\(ContinuousClock.now - prepared)",
            ])
        return pending > 0
    }

    /// Writes a group of answers (and deliveries settled without sending, and devices' outcomes) in one
    /// transaction, then applies the token hygiene they call for. Returns how many stay pending.
    private func record(
        _ answers: [(Attempt, APNsSendResult, Duration)], settled: [DeliveryUpdate],
        outcomes: [(pushId: String, outcome: DeviceOutcome)], owner: String, pushOf: [Int64: String]
    ) async throws -> Int {
        var updates = settled
        var deactivations: [TokenDeactivation] = []
        var activityDeactivations: [TokenDeactivation] = []
        var waiting: [SenderKey: Int] = [:]
        let answeredAt = clock.now().timeIntervalSince1970
        for (attempt, result, elapsed) in answers {
            observer?.apnsLatency(elapsed)
            let environment = attempt.key
            if DeliveryPlanner.isOutage(result), let circuit = circuits[environment] {
                // The way to APNs failed, not the device: the delivery waits for the peer, and the peer pauses.
                if let change = circuit.recordOutage(at: answeredAt, cause: cause(of: result, environment: environment))
                {
                    report(change, environment: environment, cause: result)
                }
                updates.append(
                    planner.wait(
                        attempt.claim, verdict: attempt.verdict, result: result, until: circuit.probeAt,
                        deadline: attempt.deadline, at: answeredAt))
                waiting[environment, default: 0] += 1
                continue
            }
            if result.transportError == nil, let change = circuits[environment]?.recordAnswer(at: answeredAt) {
                report(change, environment: environment, cause: result)
            }
            let (update, deactivation) = planner.answer(
                attempt.claim, result: result, verdict: attempt.verdict, at: answeredAt)
            updates.append(update)
            if let deactivation {
                if attempt.request.pushType == .liveactivity {
                    activityDeactivations.append(deactivation)
                } else {
                    deactivations.append(deactivation)
                }
            }
        }
        for (environment, count) in waiting { observer?.waitingForAPNs(count, environment: environment.description) }
        try await enricher.spans.run("db.record_answers", kind: .client) { span in
            span?.attributes["delivery.updates"] = updates.count
            let settled = updates
            _ = try await bounded { try await self.outbox.complete(settled, outcomes: outcomes, owner: owner) }
        }
        reportEnded(updates, pushOf: pushOf)
        let pending = updates.count { $0.state == .pending }
        if let observer {
            var tally: [AttemptResult: Int] = [:]
            for update in updates where !DeliveryPlanner.isWait(update) {
                tally[AttemptResult(state: update.state, status: update.status, reason: update.reason), default: 0] += 1
            }
            for (result, count) in tally {
                observer.attempts(count, state: result.state, status: result.status, reason: result.reason)
            }
        }
        for deactivation in activityDeactivations {
            do {
                let marked =
                    try await bounded {
                        try await self.activities?.invalidate(
                            deviceId: deactivation.deviceId, token: deactivation.token, reason: deactivation.reason,
                            at: deactivation.invalidatedAt, unlessRegisteredAfter: deactivation.unlessRegisteredAfter)
                    } ?? 0
                guard marked > 0 else { continue }
                observer?.deactivated(reason: deactivation.reason)
                logger.info(
                    "Live Activity token invalid",
                    metadata: [
                        "device_id": "\(deactivation.deviceId)",
                        "token": "\(DeviceTokenFormat.redacted(deactivation.token))",
                        "reason": "\(deactivation.reason)",
                    ])
            } catch {
                logger.error("cannot mark a Live Activity token invalid", metadata: ["error": "\(error)"])
            }
        }
        for deactivation in deactivations {
            do {
                guard let registration = try await bounded({ try await self.tokens.deactivate(deactivation) }) else {
                    continue
                }
                observer?.deactivated(reason: deactivation.reason)
                logger.info(
                    "token deactivated",
                    metadata: [
                        "device_id": "\(registration.deviceId)",
                        "token": "\(DeviceTokenFormat.redacted(registration.token))",
                        "reason": "\(deactivation.reason)",
                    ])
                feedback?.post(WebhookQueue.body(registration))
            } catch {
                logger.error("cannot deactivate a token", metadata: ["error": "\(error)"])
            }
        }
        return pending
    }

    /// One line per push and final outcome (`failed`, `expired`) among `updates`, with the count and the first
    /// reason, at `warning`: a push whose deliveries end badly is said once per batch, not once per device.
    private func reportEnded(_ updates: [DeliveryUpdate], pushOf: [Int64: String]) {
        var ended: [String: (count: Int, example: String)] = [:]
        for update in updates where update.state == .failed || update.state == .expired {
            let key = "\(pushOf[update.id] ?? "?")\u{0}\(update.state.rawValue)"
            let why = update.reason ?? update.error ?? (update.status.map { "HTTP \($0)" } ?? "unknown")
            ended[key, default: (0, why)].count += 1
        }
        for (key, value) in ended.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "\u{0}", maxSplits: 1).map(String.init)
            logger.warning(
                "deliveries of a push ended \(parts[1])",
                metadata: [
                    "push_id": "\(parts[0])", "state": "\(parts[1])", "count": "\(value.count)",
                    "reason": "\(value.example)",
                ])
        }
    }

    /// A claimed delivery of a cancelled push, settled without sending.
    static func cancelledUpdate(_ claim: ClaimedDelivery, at now: Double) -> DeliveryUpdate {
        DeliveryUpdate(
            id: claim.id, state: .cancelled, attempts: claim.attempts, error: "cancelled before it was sent",
            finishedAt: now)
    }

    /// An attempt's result as the metrics count it.
    private struct AttemptResult: Hashable {
        var state: DeliveryState
        var status: Int?
        var reason: String?
    }

    /// An enrichment's result as the metrics count it.
    private struct EnrichmentResultKey: Hashable {
        var outcome: String
        var provider: String
    }

    /// What one device of a push is sent, and the places provider that enriched it (nil: sent as it is).
    private typealias Prepared = (bytes: [UInt8], verdict: DeliveryPlanner.Verdict, provider: String?)

    /// Enriches each (push, device) of a batch: one after another when places answer at once (the local index),
    /// else up to 32 at a time, so a remote places API's latency is not paid once per device in turn.
    private func prepareAll(
        _ work: [(group: Int, push: PushDefinition, deviceId: String)], with base: Enricher,
        apps: [String: Enricher]
    ) async -> [Int: Result<Prepared, any Error>] {
        var results: [Int: Result<Prepared, any Error>] = Dictionary(minimumCapacity: work.count)
        let enricherOf: @Sendable (String) -> Enricher = { AppNamespace.pick($0, base: base, byApp: apps) }
        let enricher = base
        // Each push's payload read once for all its devices: measured, to be enriched (one that cannot be read
        // fails each device's enrichment as before), or written, when it is sent as it is.
        var payloads: [String: NotificationPayload] = [:]
        var plain: [String: [UInt8]] = [:]
        var devices: [String: Int] = [:]
        for (_, push, _) in work { devices[push.id, default: 0] += 1 }
        var read = Set<String>()
        for (_, push, _) in work where read.insert(push.id).inserted {
            if push.enrich {
                // The stencil (two writes of the document) pays from a push's second device in the batch on.
                let payload = try? NotificationPayload(json: push.payload).measured()
                payloads[push.id] = devices[push.id, default: 0] > 1 ? payload?.stenciled() : payload
            } else {
                plain[push.id] = JSONWriter.bytes(push.payload)
            }
        }
        let (parsed, written) = (payloads, plain)
        if enricher.places?.answersImmediately ?? true {
            for (group, push, deviceId) in work {
                do {
                    results[group] = .success(
                        try await prepare(
                            push, parsed: parsed[push.id], written: written[push.id], deviceId: deviceId,
                            with: enricherOf(deviceId)))
                } catch {
                    results[group] = .failure(error)
                }
            }
            return results
        }
        await withTaskGroup(of: (Int, Result<Prepared, any Error>).self) { group in
            var next = 0
            func add() {
                guard next < work.count else { return }
                let (index, push, deviceId) = work[next]
                next += 1
                group.addTask {
                    do {
                        return (
                            index,
                            .success(
                                try await self.prepare(
                                    push, parsed: parsed[push.id], written: written[push.id], deviceId: deviceId,
                                    with: enricherOf(deviceId)))
                        )
                    } catch { return (index, .failure(error)) }
                }
            }
            for _ in 0..<32 { add() }
            for await (index, result) in group {
                results[index] = result
                add()
            }
        }
        return results
    }

    /// The payload bytes a device gets, with the enrichment's outcome and rule (`parsed` and `written`: the push's
    /// payload read or written once for the batch).
    private func prepare(
        _ push: PushDefinition, parsed: NotificationPayload?, written: [UInt8]?, deviceId: String,
        with enricher: Enricher
    ) async throws -> Prepared {
        guard push.enrich else {
            return (
                written ?? JSONWriter.bytes(push.payload),
                .init(outcome: EnrichmentResult.Outcome.unchanged.rawValue, rule: "enrichment_off"), nil
            )
        }
        let payload = try parsed ?? NotificationPayload(json: push.payload)
        let result = try await enricher.enrich(deviceId: deviceId, payload: payload, mode: push.mode)
        return (
            result.encoded ?? JSONWriter.bytes(result.payload),
            .init(outcome: result.outcome.rawValue, rule: result.rule), result.placesProvider ?? "none"
        )
    }
}
