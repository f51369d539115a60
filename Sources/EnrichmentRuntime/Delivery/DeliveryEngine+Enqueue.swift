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

/// The resolve and enqueue stages: a push's devices become deliveries in the outbox, in one transaction for a
/// request's list, chunk by chunk behind a durable cursor for an audience.
extension DeliveryEngine {
    /// The new push's outcome at acceptance.
    public struct Receipt: Sendable {
        public var push: PushDefinition
        /// Deliveries committed (one per active registration of the named devices).
        public var deliveries: Int
        /// Devices that got no delivery (no active registration, no zone, quiet hours, capped), with their outcome.
        public var notSent: [DeviceOutcome]
    }

    /// Commits a push and its deliveries (one per active registration of each device), then wakes a worker.
    ///
    /// With `timing`, each device's send time is decided in its own zone (its profile's, else `defaultZone` when
    /// the push asks for the app's): a delivery due later waits in the outbox (durable, claimed when due), a device
    /// the timing skips gets none, and with a cap a device that has had enough gets none either. With a `rate`,
    /// each delivery has its own slot.
    public func submit(
        _ push: PushDefinition, timing: SendTiming? = nil, defaultZone: String? = nil
    ) async throws -> Receipt {
        guard isConfigured else { throw DeliveryError.notConfigured }
        guard isAccepting else { throw DeliveryError.shuttingDown }
        var push = push
        let registrations = try await tokens.activeRegistrations(deviceIds: push.deviceIds)
        let profiles = timing?.needsZone == true ? try await tokens.profiles(deviceIds: push.deviceIds) : [:]
        let planner = EnqueuePlanner(
            timing: timing, defaultZone: defaultZone, rate: push.rate, createdAt: push.createdAt)
        let planned = planner.plan(
            deviceIds: push.deviceIds, registrations: registrations, profiles: profiles, paceFrom: nil,
            now: push.createdAt)
        var deliveries = planned.deliveries
        var notSent = planned.notSent
        let plan: @Sendable (Set<String>) -> PushPlan? = { [planned] capped in
            guard let timing else { return nil }
            let figures = planned.figures(excluding: capped)
            return PushPlan(timing: timing, held: figures.held, firstSendAt: figures.first, lastSendAt: figures.last)
        }
        push.plan = plan([])
        if let cap = timing?.cap, !deliveries.isEmpty {
            let capped = try await outbox.enqueue(
                push, outcomes: notSent, deliveries: deliveries, cap: cap, app: push.app, plan: plan)
            push.plan = plan(capped)
            notSent += capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") }
            deliveries.removeAll { capped.contains($0.deviceId) }
        } else {
            try await outbox.enqueue(push, outcomes: notSent, deliveries: deliveries)
        }
        if !deliveries.isEmpty { rendezvous.notify(Self.wakeKey) }
        if push.callbackURL != nil { rendezvous.notify(Self.callbackKey) }
        return Receipt(push: push, deliveries: deliveries.count, notSent: notSent)
    }

    /// Commits a push addressed to given tokens rather than to its devices' registrations (a Live Activity's own
    /// token); the workers send it as any other.
    public func submit(_ push: PushDefinition, deliveries: [NewDelivery]) async throws -> Receipt {
        guard isConfigured else { throw DeliveryError.notConfigured }
        guard isAccepting else { throw DeliveryError.shuttingDown }
        try await outbox.enqueue(push, outcomes: [], deliveries: deliveries)
        if !deliveries.isEmpty { rendezvous.notify(Self.wakeKey) }
        return Receipt(push: push, deliveries: deliveries.count, notSent: [])
    }

    /// Commits a push to an audience, resolved in the background: its members (at the moment the resolution runs)
    /// are enqueued chunk by chunk, each chunk committed with the cursor, so a restart goes on where it stopped.
    /// `push.plan` carries the timing (and cap) each chunk is planned with.
    public func submit(_ push: PushDefinition, audience: String, defaultZone: String?) async throws {
        guard isConfigured else { throw DeliveryError.notConfigured }
        guard isAccepting else { throw DeliveryError.shuttingDown }
        try await outbox.beginPush(push, audience: audience, defaultZone: defaultZone)
        rendezvous.notify(Self.resolveKey)
    }

    /// Sets what resolves audiences (the service does at start).
    public func resolveAudiences(with members: @escaping AudienceMembers) {
        audienceMembers.withLock { $0 = members }
        rendezvous.notify(Self.resolveKey)
    }

    /// Waits until the push's audience is resolved, or `timeout`; returns its status then.
    public func waitUntilResolved(pushId: String, timeout: Duration) async throws -> PushStatus? {
        let deadline = ContinuousClock.now + timeout
        var seen = rendezvous.watch(pushId)
        defer { rendezvous.unwatch(pushId) }
        while true {
            let status = try await outbox.status(pushId: pushId, now: clock.now().timeIntervalSince1970)
            guard let status, status.resolving else { return status }
            let left = deadline - ContinuousClock.now
            if left <= .zero { return status }
            _ = await rendezvous.wait(pushId, since: seen, timeout: min(left, .milliseconds(100)))
            seen = rendezvous.generation(pushId)
        }
    }

    /// Takes pushes still resolving (this node's after a restart, another node's whose lease ran out) and
    /// resolves them, one at a time; looks again when a push is submitted, and every second.
    func resolveLoop() async {
        var failing = false
        while !isStopping {
            let seen = rendezvous.generation(Self.resolveKey)
            var found = false
            if audienceMembers.withLock({ $0 }) != nil {
                do {
                    let (node, now, lease) = (self.node, clock.now().timeIntervalSince1970, self.lease)
                    let claims = try await bounded {
                        try await self.outbox.claimResolution(owner: node, now: now, lease: lease, limit: 1)
                    }
                    for claim in claims { try await resolve(claim) }
                    found = !claims.isEmpty
                    if failing { logger.notice("audience resolution resumed") }
                    failing = false
                } catch {
                    if !failing {
                        logger.error(
                            "an audience could not be resolved; tried again every second",
                            metadata: ["error": "\(error)"])
                    }
                    failing = true
                }
            }
            if found { continue }
            _ = await rendezvous.wait(Self.resolveKey, since: seen, timeout: .seconds(1))
        }
    }

    /// Resolves one push's audience from its cursor on and commits it chunk by chunk.
    func resolve(_ claim: ResolutionClaim) async throws {
        guard let members = audienceMembers.withLock({ $0 }) else { return }
        let started = ContinuousClock.now
        let push = claim.push
        var source = ChunkSource(
            list: try await members(claim.audience, push.app, clock.now().timeIntervalSince1970),
            through: claim.through, room: max(0, settings.maximumAudience - claim.matched))
        let timing = push.plan?.timing
        let planner = EnqueuePlanner(
            timing: timing, defaultZone: claim.defaultZone, rate: push.rate, createdAt: push.createdAt)
        var paceNext = claim.paceNext
        var enqueued = 0
        while !isStopping {
            let (chunk, through, last) = try await source.next(
                settings.resolveChunk,
                page: { after, limit in
                    try await self.bounded {
                        try await self.tokens.devices(inApp: push.app, after: after, limit: limit)
                    }
                })
            if source.truncated {
                logger.warning(
                    "an audience holds more devices than one push may reach; the first ones (by id) are sent to",
                    metadata: ["push_id": "\(push.id)", "limit": "\(settings.maximumAudience)"])
            }
            let registrations = try await bounded { try await self.tokens.activeRegistrations(deviceIds: chunk) }
            let profiles =
                timing?.needsZone == true
                ? try await bounded { try await self.tokens.profiles(deviceIds: chunk) } : [:]
            let planned = planner.plan(
                deviceIds: chunk, registrations: registrations, profiles: profiles, paceFrom: paceNext,
                now: clock.now().timeIntervalSince1970)
            let figures = planned.figures(excluding: [])
            let resolved = ResolvedChunk(
                pushId: push.id, deviceIds: chunk, outcomes: planned.notSent, deliveries: planned.deliveries,
                through: through ?? "", last: last, cap: timing?.cap, app: push.app,
                held: figures.held, firstSendAt: figures.first, lastSendAt: figures.last, paceNext: planned.paceNext)
            let leaseUntil = clock.now().timeIntervalSince1970 + lease
            guard
                try await bounded({
                    try await self.outbox.enqueueChunk(resolved, owner: self.node, leaseUntil: leaseUntil)
                }) != nil
            else {
                logger.info(
                    "audience resolution stopped: the push was cancelled, or another node took it over",
                    metadata: ["push_id": "\(push.id)", "devices": "\(claim.matched + enqueued)"])
                rendezvous.notify(push.id)
                return
            }
            enqueued += chunk.count
            paceNext = planned.paceNext ?? paceNext
            if !planned.deliveries.isEmpty { rendezvous.notify(Self.wakeKey) }
            guard !last else {
                logger.info(
                    "audience resolved",
                    metadata: [
                        "push_id": "\(push.id)", "devices": "\(claim.matched + enqueued)",
                        "took": "\(ContinuousClock.now - started)",
                    ])
                rendezvous.notify(push.id)
                if push.callbackURL != nil { rendezvous.notify(Self.callbackKey) }
                return
            }
        }
        // Stopping: the rest is resolved after the restart (or by another node), from the cursor.
    }
}

/// An audience's devices a chunk at a time, after the push's cursor and within the room the push has left: from a
/// list in memory, or paged from the token store (everyone), each device once.
public struct ChunkSource: Sendable {
    private var listed: [String]
    private var offset = 0
    private let except: Set<String>?
    private var cursor: String?
    private var room: Int
    private var exhausted = false
    /// True once the room ran out before the audience did (said once).
    public private(set) var truncated = false

    public init(list: AudienceMemberList, through: String?, room: Int) {
        self.room = room
        cursor = through
        switch list {
        case .listed(let ids):
            listed = ids
            except = nil
            // Devices up to the cursor were enqueued before a restart: each device gets its deliveries once.
            if let through { offset = ids.partitionPoint { $0 <= through } }
        case .everyone(let removed):
            listed = []
            except = removed
        }
    }

    /// The next chunk of up to `size` devices, the cursor after it, and whether it is the last.
    public mutating func next(
        _ size: Int, page: (_ after: String?, _ limit: Int) async throws -> [String]
    ) async throws -> (devices: [String], through: String?, last: Bool) {
        let size = max(1, size)
        truncated = false
        guard let except else {
            let end = min(listed.count, offset + min(size, room))
            let chunk = Array(listed[offset..<end])
            offset = end
            room -= chunk.count
            if room == 0, offset < listed.count { truncated = true }
            let last = offset == listed.count || room == 0
            if last { listed = [] }
            return (chunk, chunk.last ?? cursor, last)
        }
        // Paged from the store: the cursor moves past the devices taken away too.
        let read = try await page(cursor, size)
        var chunk: [String] = []
        chunk.reserveCapacity(read.count)
        var through = cursor
        for id in read {
            if chunk.count == room {
                truncated = true
                break
            }
            through = id
            if !except.contains(id) { chunk.append(id) }
        }
        room -= chunk.count
        cursor = through
        // Only an empty page ends it: a page holds fewer devices than rows when a device has two registrations.
        let last = truncated || read.isEmpty
        return (chunk, through, last)
    }
}

extension Array where Element: Comparable {
    /// The index of the first element for which `belongs` is false (the array is partitioned by it).
    fileprivate func partitionPoint(_ belongs: (Element) -> Bool) -> Int {
        var (low, high) = (0, count)
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
