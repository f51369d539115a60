public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging

/// What the enqueue stage tells about a request's push.
extension DeliveryEngine {
    /// The new push's outcome at acceptance.
    public struct Receipt: Sendable {
        public var push: PushDefinition
        /// Deliveries committed (one per active registration of the named devices).
        public var deliveries: Int
        /// Devices that got no delivery (no active registration, no zone, quiet hours, capped), with their outcome.
        public var notSent: [DeviceOutcome]
    }

    /// What adding devices to an open push came to.
    public struct Added: Sendable {
        public var push: PushDefinition
        /// Devices added now (each given its deliveries, or an outcome in `notSent`).
        public var added: Int
        /// Devices of the request already in the push: left out.
        public var already: [String]
        /// Deliveries committed now.
        public var deliveries: Int
        /// Devices added now that get no delivery, with why.
        public var notSent: [DeviceOutcome]
        /// Devices in the push so far.
        public var matched: Int
        /// False once the push is closed (this request closed it).
        public var open: Bool
    }

    /// What a request adding devices to a push came to.
    public enum AddOutcome: Sendable {
        case added(Added)
        /// The push is not open (closed, done, cancelled, or unknown): nothing was added.
        case notOpen
        /// The devices would take the push past `settings.maximumAudience`: nothing was added.
        case tooLarge(matched: Int, limit: Int)
    }
}

/// The enqueue stage: a push's devices become deliveries committed to the outbox. A request's list is planned
/// (`EnqueuePlanner`: timing, cap, pace) and committed in one transaction; an audience is committed as a push that
/// is resolving (the resolve stage commits its chunks here); an open push gets its devices request by request, each
/// committed as a chunk. Each commit wakes the lanes when it made deliveries.
struct EnqueueStage: Sendable {
    let context: PipelineContext

    /// Commits a push and its deliveries (one per active registration of each device), then wakes a worker.
    ///
    /// With `timing`, each device's send time is decided in its own zone (its profile's, else `defaultZone` when
    /// the push asks for the app's): a delivery due later waits in the outbox (durable, claimed when due), a device
    /// the timing skips gets none, and with a cap a device that has had enough gets none either. With a `rate`,
    /// each delivery has its own slot.
    func submit(
        _ push: PushDefinition, timing: SendTiming? = nil, defaultZone: String? = nil
    ) async throws -> DeliveryEngine.Receipt {
        var push = push
        let registrations = try await context.tokens.activeRegistrations(deviceIds: push.deviceIds)
        let profiles = timing?.needsZone == true ? try await context.tokens.profiles(deviceIds: push.deviceIds) : [:]
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
            let capped = try await context.outbox.enqueue(
                push, outcomes: notSent, deliveries: deliveries, cap: cap, app: push.app, plan: plan)
            push.plan = plan(capped)
            notSent += capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") }
            deliveries.removeAll { capped.contains($0.deviceId) }
        } else {
            try await context.outbox.enqueue(push, outcomes: notSent, deliveries: deliveries)
        }
        if !deliveries.isEmpty { context.rendezvous.notify(PipelineContext.wakeKey) }
        if push.callbackURL != nil { context.rendezvous.notify(PipelineContext.callbackKey) }
        return DeliveryEngine.Receipt(push: push, deliveries: deliveries.count, notSent: notSent)
    }

    /// Commits a push addressed to given tokens rather than to its devices' registrations (a Live Activity's own
    /// token); the workers send it as any other.
    func submit(_ push: PushDefinition, deliveries: [NewDelivery]) async throws -> DeliveryEngine.Receipt {
        try await context.outbox.enqueue(push, outcomes: [], deliveries: deliveries)
        if !deliveries.isEmpty { context.rendezvous.notify(PipelineContext.wakeKey) }
        return DeliveryEngine.Receipt(push: push, deliveries: deliveries.count, notSent: [])
    }

    /// Commits a push to an audience, resolved in the background: its members (at the moment the resolution runs)
    /// are enqueued chunk by chunk, each chunk committed with the cursor, so a restart goes on where it stopped.
    /// `push.plan` carries the timing (and cap) each chunk is planned with.
    func submit(_ push: PushDefinition, audience: String, defaultZone: String?) async throws {
        try await context.outbox.beginPush(push, audience: audience, defaultZone: defaultZone)
        context.rendezvous.notify(PipelineContext.resolveKey)
    }

    /// Commits an open push: no device yet; `add` gives them. `push.plan` carries the timing (and cap) each added
    /// chunk is planned with. It closes itself after `context.settings.openPushIdle` seconds with no device added.
    func open(_ push: PushDefinition, defaultZone: String?) async throws {
        try await context.outbox.openPush(
            push, defaultZone: defaultZone, until: context.now + context.settings.openPushIdle)
    }

    /// Adds devices to an open push (and closes it when `close`).
    func add(pushId: String, deviceIds: [String], close: Bool) async throws -> DeliveryEngine.AddOutcome {
        guard let claim = try await context.outbox.openClaim(pushId: pushId) else { return .notOpen }
        guard claim.matched + deviceIds.count <= context.settings.maximumAudience else {
            return .tooLarge(matched: claim.matched, limit: context.settings.maximumAudience)
        }
        let push = claim.push
        let now = context.now
        let planner = EnqueuePlanner(
            timing: push.plan?.timing, defaultZone: claim.defaultZone, rate: push.rate, createdAt: push.createdAt)
        let (chunk, planned) = try await plan(
            deviceIds, of: push, with: planner, paceFrom: claim.paceNext, through: "", last: close)
        guard let appended = try await context.outbox.appendChunk(chunk, until: now + context.settings.openPushIdle)
        else {
            return .notOpen
        }
        let left = appended.already.union(appended.capped)
        let deliveries = planned.deliveries.filter { !left.contains($0.deviceId) }
        var notSent = planned.notSent.filter { !appended.already.contains($0.deviceId) }
        notSent += appended.capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") }
        if !deliveries.isEmpty { context.rendezvous.notify(PipelineContext.wakeKey) }
        context.rendezvous.notify(pushId)
        if close, push.callbackURL != nil { context.rendezvous.notify(PipelineContext.callbackKey) }
        let added = deviceIds.count - appended.already.count
        return .added(
            DeliveryEngine.Added(
                push: push, added: added, already: deviceIds.filter { appended.already.contains($0) },
                deliveries: deliveries.count, notSent: notSent, matched: claim.matched + added, open: !close))
    }

    /// Closes an open push: it is done once its deliveries are final. False when it was not open.
    func close(pushId: String) async throws -> Bool {
        let closed = try await context.outbox.closePush(pushId: pushId)
        if closed {
            context.rendezvous.notify(pushId)
            context.rendezvous.notify(PipelineContext.callbackKey)
        }
        return closed
    }

    /// Plans a chunk of a push's devices (an audience's, or an open push's request): their registrations and, when
    /// the timing needs them, their zones, in one read each; `EnqueuePlanner` decides each device's deliveries.
    func plan(
        _ deviceIds: [String], of push: PushDefinition, with planner: EnqueuePlanner, paceFrom: Double?,
        through: String, last: Bool
    ) async throws -> (chunk: ResolvedChunk, planned: EnqueuePlanner.Plan) {
        let timing = push.plan?.timing
        let registrations = try await context.bounded {
            try await context.tokens.activeRegistrations(deviceIds: deviceIds)
        }
        let profiles =
            timing?.needsZone == true
            ? try await context.bounded { try await context.tokens.profiles(deviceIds: deviceIds) } : [:]
        let planned = planner.plan(
            deviceIds: deviceIds, registrations: registrations, profiles: profiles, paceFrom: paceFrom,
            now: context.now)
        let figures = planned.figures(excluding: [])
        let chunk = ResolvedChunk(
            pushId: push.id, deviceIds: deviceIds, outcomes: planned.notSent, deliveries: planned.deliveries,
            through: through, last: last, cap: timing?.cap, app: push.app, held: figures.held,
            firstSendAt: figures.first, lastSendAt: figures.last, paceNext: planned.paceNext)
        return (chunk, planned)
    }

    /// Commits one resolved chunk of an audience with the push's cursor; false when the push was cancelled or
    /// another node took its resolution over (nothing was written).
    func commit(_ chunk: ResolvedChunk, owner: String) async throws -> Bool {
        let leaseUntil = context.now + context.lease
        let committed = try await context.bounded {
            try await context.outbox.enqueueChunk(chunk, owner: owner, leaseUntil: leaseUntil)
        }
        guard committed != nil else { return false }
        if !chunk.deliveries.isEmpty { context.rendezvous.notify(PipelineContext.wakeKey) }
        return true
    }
}
