import APNsCore
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import Synchronization
import Tracing

/// The claim stage: each lane claims due deliveries with a lease and hands each batch on to the send stage (which
/// enriches, sends and records it), keeping up to `flightsPerLane` batches between their claim and their last
/// answer recorded, so the database, the enrichment and the wire work at the same time.
struct ClaimStage: Sendable {
    let context: PipelineContext
    let send: SendStage
    /// Deliveries a lane claims at once.
    let batchSize: Int
    /// Batches a lane may have between their claim and their last answer recorded: the next is claimed and enriched
    /// while the answers of the one before are still coming. Two, unless the concurrency is 1 (then one batch of
    /// one).
    let flightsPerLane: Int
    /// How often lane 0 looks for due work that no wake-up announced.
    let pollInterval: Duration
    /// What this node's lanes hold, by push (counted from the claim to the last answer recorded).
    let inFlight: InFlightPushes

    /// One claim-send-record loop. Lane 0 keeps watch when there is no work: one look per `pollInterval` at when the
    /// next delivery is due (one query), claiming when one is; the other lanes sleep until woken (a commit here, a
    /// notification from another node, or lane 0 finding more than it can take).
    func run(lane index: Int) async {
        var lastDepthReport = ContinuousClock.now - .seconds(10)
        var probe = false
        // Each batch in flight claims under its own owner (`<node>-<lane>` then `<node>-<lane>-<slot>`), so a
        // failure releases that batch's claims and not those of the batch beside it, which may be on the wire.
        await withTaskGroup(of: Int.self) { flights in
            var freeSlots = Array((0..<flightsPerLane).reversed())
            while !context.isStopping {
                if freeSlots.isEmpty, let slot = await flights.next() { freeSlots.append(slot) }
                let seen = context.rendezvous.generation(PipelineContext.wakeKey)
                if probe {
                    // Idle: look at when the next delivery is due before claiming.
                    let now = context.now
                    let due = try? await context.bounded { try await context.outbox.nextDue() }
                    if index > 0 || due.map({ $0 > now }) ?? true {
                        var wait = index > 0 ? Duration.seconds(60) : pollInterval
                        if index == 0, let due {
                            wait = min(wait, .milliseconds(Int64(max(0.005, due - now) * 1000)))
                        }
                        // Woken: claim at once; timed out: look again (lane 0) or sleep on (the others).
                        probe = !(await context.rendezvous.wait(PipelineContext.wakeKey, since: seen, timeout: wait))
                        continue
                    }
                }
                // Woken by a batch's end after `beginShutdown()`: no new claim.
                if context.isStopping { break }
                let slot = freeSlots.removeLast()
                let owner = slot == 0 ? "\(context.node)-\(index)" : "\(context.node)-\(index)-\(slot)"
                var claimed: [ClaimedDelivery] = []
                do {
                    let claimStarted = ContinuousClock.now
                    let (limit, now, lease) = (batchSize, context.now, context.lease)
                    claimed = try await context.bounded {
                        try await context.outbox.claim(owner: owner, limit: limit, now: now, lease: lease)
                    }
                    if !claimed.isEmpty {
                        context.logger.debug(
                            "claimed",
                            metadata: ["count": "\(claimed.count)", "took": "\(ContinuousClock.now - claimStarted)"])
                    }
                } catch {
                    await recover(from: error, claimed: claimed, owner: owner)
                }
                // A full claim means more is waiting: the other lanes help.
                if claimed.count == batchSize { context.rendezvous.notify(PipelineContext.wakeKey) }
                if claimed.isEmpty {
                    freeSlots.append(slot)
                } else {
                    // The batch is enriched and handed to the senders in a task of its own; the lane goes on once
                    // it is on its way (or failed), and its answers are recorded meanwhile.
                    let (handedOff, handOff) = AsyncStream<Void>.makeStream()
                    let batch = claimed
                    // Counted before anything of the batch can be sent: a cancel that finds none of its push here
                    // knows this node sends nothing of it any more.
                    inFlight.add(batch)
                    flights.addTask {
                        defer {
                            handOff.finish()
                            inFlight.remove(batch)
                            for pushId in Set(batch.map(\.pushId)) { context.rendezvous.notify(pushId) }
                        }
                        var leftPending = true
                        do {
                            leftPending = try await send.spans.run("delivery.batch") { span in
                                span?.attributes["delivery.count"] = batch.count
                                return try await send.process(batch, owner: owner, handedOff: { handOff.finish() })
                            }
                        } catch {
                            await recover(from: error, claimed: batch, owner: owner)
                        }
                        // The lane may have looked for work while this batch was out, and found its deliveries
                        // leased: those that stay pending (retries, waits for APNs, claims released after a
                        // failure) are looked for again now.
                        if leftPending { context.rendezvous.notify(PipelineContext.wakeKey) }
                        return slot
                    }
                    for await _ in handedOff {}
                }
                if index == 0, ContinuousClock.now - lastDepthReport > .seconds(5) {
                    lastDepthReport = ContinuousClock.now
                    await send.reportGauges()
                }
                probe = claimed.isEmpty
            }
        }
    }

    /// After a lane's failure: what `owner` claimed and did not record can be claimed again at once. The failure is
    /// often the database itself, so the release is tried again until it goes through (else the claims would wait
    /// out their whole lease once the database is back), within the lease. A claim left behind at the bound may
    /// still commit: its rows are released too.
    func recover(from error: any Error, claimed: [ClaimedDelivery], owner: String) async {
        context.logger.error("delivery worker failed; retrying", metadata: ["error": "\(error)"])
        if !claimed.isEmpty || error is DatabaseTimeout {
            let giveUp = ContinuousClock.now + .milliseconds(Int64(context.lease * 1000))
            while (try? await context.bounded({ try await context.outbox.releaseClaims(owner: owner) })) == nil,
                ContinuousClock.now < giveUp,
                !Task.isCancelled
            {
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        try? await Task.sleep(for: .milliseconds(500))
    }
}
