import APNsCore
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import Synchronization
import Tracing

/// The send stage: a claimed batch is settled where the planner says so (cancelled, expired, refused locally),
/// enriched (`EnrichStage`), handed to the senders per credential and environment (not to a peer whose circuit is
/// open), and its answers handed to the record stage as they come.
final class SendStage: Sendable {
    let context: PipelineContext
    let enrich: EnrichStage
    let record: RecordStage
    /// One sender per credential and APNs environment: the HTTP/2 client in service, any `APNsBatchSending` in a
    /// test.
    let senders: [SenderKey: any APNsBatchSending]
    /// What becomes of each claimed delivery (no I/O: this stage performs what it decides).
    let planner: DeliveryPlanner
    let cancelled: CancelledPushes
    /// How often the answers got while a batch is still sending are written (the last answer is written at once).
    let recordInterval: Duration
    private let pushCache = Mutex<[String: PushDefinition]>([:])
    private let lastConnections = Mutex<[SenderKey: Int]>([:])

    init(
        context: PipelineContext, enrich: EnrichStage, record: RecordStage, senders: [SenderKey: any APNsBatchSending],
        planner: DeliveryPlanner, cancelled: CancelledPushes
    ) {
        self.context = context
        self.enrich = enrich
        self.record = record
        self.senders = senders
        self.planner = planner
        self.cancelled = cancelled
        self.recordInterval = .milliseconds(Int64(context.settings.recordInterval * 1000))
    }

    var spans: SpanRecorder { record.spans }
    var circuits: [SenderKey: APNsCircuit] { record.circuits }

    /// The answers of one round of sends, as they arrive: each one is added and the lane is woken (no polling);
    /// the stream ends when every send has its answer.
    final class Answers: Sendable {
        let items = Mutex<[(DeliveryAttempt, APNsSendResult, Duration)]>([])
        let arrivals: AsyncStream<Void>
        private let continuation: AsyncStream<Void>.Continuation
        /// Notified once every send has its answer.
        private let allIn = Rendezvous()
        private static let done = "done"

        init() {
            (arrivals, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
            _ = allIn.watch(Self.done)
        }

        func add(_ answer: (DeliveryAttempt, APNsSendResult, Duration)) {
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

        func take() -> [(DeliveryAttempt, APNsSendResult, Duration)] {
            items.withLock { items in
                defer { items.removeAll(keepingCapacity: true) }
                return items
            }
        }
    }

    /// Enriches each claimed device once, sends every claimed delivery, and records the results.
    ///
    /// `handedOff` is called once every attempt is with its sender (before the answers come back). Returns whether
    /// any delivery of the batch is still pending (to be retried, or waiting for APNs).
    func process(
        _ claimed: [ClaimedDelivery], owner: String, handedOff: @escaping @Sendable () -> Void
    ) async throws -> Bool {
        let started = ContinuousClock.now
        let now = context.now
        var updates: [DeliveryUpdate] = []
        var attempts: [SenderKey: [DeliveryAttempt]] = [:]
        let groups = DeliveryPlanner.groups(claimed)
        let prefetched = try await enrich.prefetch(claimed)
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
        let cancelledHere = cancelled.snapshot
        for (index, claims) in groups.enumerated() {
            // A push cancelled after these were committed: they are not sent.
            if claims[0].cancelled || cancelledHere.contains(claims[0].pushId) {
                updates += claims.map { RecordStage.cancelledUpdate($0, at: now) }
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
        let preparedByGroup = await enrich.enrich(work, fixes: prefetched)
        for (index, push, _) in work {
            let claims = groups[index]
            let prepared: EnrichStage.Prepared
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
            for claim in claims {
                switch planner.prepare(claim, push: push, payload: prepared.bytes, verdict: prepared.verdict, now: now)
                {
                case .settle(let update): updates.append(update)
                case .send(let request):
                    // The app's credential sends it: the app whose bundle id is the topic (or the default one).
                    let topic = push.topic ?? claim.delivery.topic
                    guard let key = context.settings.senderKey(topic: topic, environment: claim.delivery.environment)
                    else {
                        updates.append(
                            DeliveryUpdate(
                                id: claim.id, state: .failed, attempts: claim.attempts,
                                error: context.settings.noCredentialMessage(
                                    topic: topic, environment: claim.delivery.environment),
                                outcome: prepared.verdict.outcome,
                                rule: prepared.verdict.rule, finishedAt: now))
                        continue
                    }
                    attempts[key, default: []].append(
                        DeliveryAttempt(
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
            context.observer?.waitingForAPNs(batch.count, environment: environment.description)
        }
        // A cancel that came while the batch was enriched: its deliveries do not go on the wire.
        let cancelledNow = cancelled.snapshot
        if cancelledNow != cancelledHere {
            for (environment, batch) in attempts {
                let (dropped, kept) = (
                    batch.filter { cancelledNow.contains($0.claim.pushId) },
                    batch.filter { !cancelledNow.contains($0.claim.pushId) }
                )
                guard !dropped.isEmpty else { continue }
                attempts[environment] = kept
                updates += dropped.map { RecordStage.cancelledUpdate($0.claim, verdict: $0.verdict, at: now) }
            }
        }
        let pushOf = Dictionary(claimed.map { ($0.id, $0.pushId) }, uniquingKeysWith: { first, _ in first })

        let prepared = ContinuousClock.now
        let sent = Answers()
        let senders = self.senders
        let concurrency = context.settings.concurrency
        let spans = self.spans
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
        // The first write carries the deliveries settled without sending (expired, refused locally); each update
        // carries its device's enrichment outcome (a device's own is not written a second time). Then answers are written as they arrive: the lane wakes on each arrival, takes every answer
        // waiting, and writes them in one transaction, at most once per `recordInterval` (answers that come while
        // a write is under way wait for the next), so a crash resends only what was on the wire or answered in
        // the last interval, not the whole batch. The batch's last answer is written at once: the batch holds its
        // slot (the lane's next claim) until it is recorded.
        var pending = try await record.record([], settled: updates, owner: owner, pushOf: pushOf)
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
            pending += try await record.record(answers, settled: [], owner: owner, pushOf: pushOf)
            recorded += answers.count
            lastWrite = ContinuousClock.now
        }
        // Every send has its answer once `allSent` is done (the wake-ups also end early if this task is
        // cancelled): then what arrived after the last wake-up is written too, so no answer is left unrecorded.
        await allSent
        let rest = sent.take()
        if !rest.isEmpty {
            pending += try await record.record(rest, settled: [], owner: owner, pushOf: pushOf)
            recorded += rest.count
        }
        for pushId in Set(claimed.map(\.pushId)) { context.rendezvous.notify(pushId) }
        // A push can only have asked for a callback where callbacks are on: elsewhere a batch costs no look (the
        // 5 s look still finds any left from before they were turned off).
        if !context.settings.callbackHosts.isEmpty { context.rendezvous.notify(PipelineContext.callbackKey) }
        context.logger.debug(
            "batch done",
            metadata: [
                "deliveries": "\(claimed.count)", "sent": "\(recorded)", "prepare": "\(prepared - started)",
                "send_and_record": "\(ContinuousClock.now - prepared)",
            ])
        return pending > 0
    }

    /// A push's definition, read once per node (a push does not change once committed).
    func definition(_ id: String) async throws -> PushDefinition? {
        if let cached = pushCache.withLock({ $0[id] }) { return cached }
        guard let push = try await context.bounded({ try await self.context.outbox.push(id: id) }) else { return nil }
        pushCache.withLock { cache in
            if cache.count >= 1024 { cache.removeAll(keepingCapacity: true) }
            cache[id] = push
        }
        return push
    }

    /// The outbox's depth and the connections opened since the last report, to the metrics.
    func reportGauges() async {
        guard let observer = context.observer else { return }
        if let depth = try? await context.bounded({ try await self.context.outbox.depth() }) {
            observer.outboxDepth(depth)
        }
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
}

/// One prepared attempt. A class: an attempt goes from the batch to the sender's answer to the record, and each
/// of those copies is one reference, not one per string of the delivery and the request.
final class DeliveryAttempt: Sendable {
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
