public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import Synchronization

/// Resolves an audience (its JSON, as the request gave it) in an app at an instant (epoch seconds) to the stored
/// keys of its devices.
public typealias AudienceMembers =
    @Sendable (_ audience: String, _ app: String, _ now: Double) async throws ->
    AudienceMemberList

/// An audience's devices, as the resolve stage takes them.
public enum AudienceMemberList: Sendable {
    /// Every member (stored keys), in ascending order.
    case listed([String])
    /// Every device of the app with an active registration but these: read from the token store a chunk at a
    /// time, never held whole (everyone, or everyone but a few).
    case everyone(except: Set<String>)
}

/// The resolve stage: a push to an audience is resolved in the background, its members (at the moment the
/// resolution runs, `ChunkSource`) planned chunk by chunk (`EnqueuePlanner`) and each chunk committed by the
/// enqueue stage with the push's cursor, so a restart (or another node, once the lease ran out) goes on where it
/// stopped. The service's memory does not grow with the audience: everyone is paged from the token store.
final class ResolveStage: Sendable {
    let context: PipelineContext
    let enqueue: EnqueueStage
    /// Resolves an audience (as the request gave it) in an app at an instant to its devices' stored keys: set by
    /// the service, which knows the places and regions an audience may name.
    private let audienceMembers = Mutex<AudienceMembers?>(nil)

    init(context: PipelineContext, enqueue: EnqueueStage) {
        self.context = context
        self.enqueue = enqueue
        _ = context.rendezvous.watch(PipelineContext.resolveKey)
    }

    /// Sets what resolves audiences (the service does at start).
    func resolveAudiences(with members: @escaping AudienceMembers) {
        audienceMembers.withLock { $0 = members }
        context.rendezvous.notify(PipelineContext.resolveKey)
    }

    /// Waits until the push's audience is resolved, or `timeout`; returns its status then.
    func waitUntilResolved(pushId: String, timeout: Duration) async throws -> PushStatus? {
        let deadline = ContinuousClock.now + timeout
        var seen = context.rendezvous.watch(pushId)
        defer { context.rendezvous.unwatch(pushId) }
        while true {
            let status = try await context.outbox.status(pushId: pushId, now: context.now)
            guard let status, status.resolving else { return status }
            let left = deadline - ContinuousClock.now
            if left <= .zero { return status }
            _ = await context.rendezvous.wait(pushId, since: seen, timeout: min(left, .milliseconds(100)))
            seen = context.rendezvous.generation(pushId)
        }
    }

    /// Takes pushes still resolving (this node's after a restart, another node's whose lease ran out) and
    /// resolves them, one at a time; looks again when a push is submitted, and every second.
    func run() async {
        let context = self.context
        var failing = false
        while !context.isStopping {
            let seen = context.rendezvous.generation(PipelineContext.resolveKey)
            var found = false
            if audienceMembers.withLock({ $0 }) != nil {
                do {
                    let (node, now, lease) = (context.node, context.now, context.lease)
                    let claims = try await context.bounded {
                        try await context.outbox.claimResolution(owner: node, now: now, lease: lease, limit: 1)
                    }
                    for claim in claims { try await resolve(claim) }
                    found = !claims.isEmpty
                    if failing { context.logger.notice("audience resolution resumed") }
                    failing = false
                } catch {
                    if !failing {
                        context.logger.error(
                            "an audience could not be resolved; tried again every second",
                            metadata: ["error": "\(error)"])
                    }
                    failing = true
                }
            }
            if found { continue }
            _ = await context.rendezvous.wait(PipelineContext.resolveKey, since: seen, timeout: .seconds(1))
        }
    }

    /// Resolves one push's audience from its cursor on and commits it chunk by chunk.
    func resolve(_ claim: ResolutionClaim) async throws {
        guard let members = audienceMembers.withLock({ $0 }) else { return }
        let context = self.context
        let started = ContinuousClock.now
        let push = claim.push
        var source = ChunkSource(
            list: try await members(claim.audience, push.app, context.now),
            through: claim.through, room: max(0, context.settings.maximumAudience - claim.matched))
        let timing = push.plan?.timing
        let planner = EnqueuePlanner(
            timing: timing, defaultZone: claim.defaultZone, rate: push.rate, createdAt: push.createdAt)
        var paceNext = claim.paceNext
        var enqueued = 0
        while !context.isStopping {
            let (chunk, through, last) = try await source.next(
                context.settings.resolveChunk,
                page: { after, limit in
                    try await context.bounded {
                        try await context.tokens.devices(inApp: push.app, after: after, limit: limit)
                    }
                })
            if source.truncated {
                context.logger.warning(
                    "an audience holds more devices than one push may reach; the first ones (by id) are sent to",
                    metadata: ["push_id": "\(push.id)", "limit": "\(context.settings.maximumAudience)"])
            }
            let (resolved, planned) = try await enqueue.plan(
                chunk, of: push, with: planner, paceFrom: paceNext, through: through ?? "", last: last)
            guard try await enqueue.commit(resolved, owner: context.node) else {
                context.logger.info(
                    "audience resolution stopped: the push was cancelled, or another node took it over",
                    metadata: ["push_id": "\(push.id)", "devices": "\(claim.matched + enqueued)"])
                context.rendezvous.notify(push.id)
                return
            }
            enqueued += chunk.count
            paceNext = planned.paceNext ?? paceNext
            guard !last else {
                context.logger.info(
                    "audience resolved",
                    metadata: [
                        "push_id": "\(push.id)", "devices": "\(claim.matched + enqueued)",
                        "took": "\(ContinuousClock.now - started)",
                    ])
                context.rendezvous.notify(push.id)
                if push.callbackURL != nil { context.rendezvous.notify(PipelineContext.callbackKey) }
                return
            }
        }
        // Stopping: the rest is resolved after the restart (or by another node), from the cursor.
    }
}
