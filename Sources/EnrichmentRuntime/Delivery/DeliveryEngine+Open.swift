public import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging

/// Open pushes: one push to a list of devices too long for one request, given in further requests (1,000 device
/// ids each) until it is closed. Each request's devices are planned as a chunk of an audience is (timing, cap,
/// pace) and committed in one transaction; a device named twice is added once.
extension DeliveryEngine {
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

    /// Commits an open push: no device yet; `add` gives them. `push.plan` carries the timing (and cap) each added
    /// chunk is planned with. It closes itself after `settings.openPushIdle` seconds with no device added.
    public func open(_ push: PushDefinition, defaultZone: String?) async throws {
        guard isConfigured else { throw DeliveryError.notConfigured }
        guard isAccepting else { throw DeliveryError.shuttingDown }
        try await outbox.openPush(
            push, defaultZone: defaultZone, until: clock.now().timeIntervalSince1970 + settings.openPushIdle)
    }

    /// What a request adding devices to a push came to.
    public enum AddOutcome: Sendable {
        case added(Added)
        /// The push is not open (closed, done, cancelled, or unknown): nothing was added.
        case notOpen
        /// The devices would take the push past `settings.maximumAudience`: nothing was added.
        case tooLarge(matched: Int, limit: Int)
    }

    /// Adds devices to an open push (and closes it when `close`).
    public func add(pushId: String, deviceIds: [String], close: Bool) async throws -> AddOutcome {
        guard isConfigured else { throw DeliveryError.notConfigured }
        guard isAccepting else { throw DeliveryError.shuttingDown }
        guard let claim = try await outbox.openClaim(pushId: pushId) else { return .notOpen }
        guard claim.matched + deviceIds.count <= settings.maximumAudience else {
            return .tooLarge(matched: claim.matched, limit: settings.maximumAudience)
        }
        let push = claim.push
        let timing = push.plan?.timing
        let now = clock.now().timeIntervalSince1970
        let registrations = try await tokens.activeRegistrations(deviceIds: deviceIds)
        let profiles = timing?.needsZone == true ? try await tokens.profiles(deviceIds: deviceIds) : [:]
        let planner = EnqueuePlanner(
            timing: timing, defaultZone: claim.defaultZone, rate: push.rate, createdAt: push.createdAt)
        let planned = planner.plan(
            deviceIds: deviceIds, registrations: registrations, profiles: profiles, paceFrom: claim.paceNext, now: now)
        let figures = planned.figures(excluding: [])
        let chunk = ResolvedChunk(
            pushId: pushId, deviceIds: deviceIds, outcomes: planned.notSent, deliveries: planned.deliveries,
            through: "", last: close, cap: timing?.cap, app: push.app, held: figures.held,
            firstSendAt: figures.first, lastSendAt: figures.last, paceNext: planned.paceNext)
        guard let appended = try await outbox.appendChunk(chunk, until: now + settings.openPushIdle) else {
            return .notOpen
        }
        let left = appended.already.union(appended.capped)
        let deliveries = planned.deliveries.filter { !left.contains($0.deviceId) }
        var notSent = planned.notSent.filter { !appended.already.contains($0.deviceId) }
        notSent += appended.capped.sorted().map { DeviceOutcome(deviceId: $0, outcome: "not_sent", rule: "capped") }
        if !deliveries.isEmpty { rendezvous.notify(Self.wakeKey) }
        rendezvous.notify(pushId)
        if close, push.callbackURL != nil { rendezvous.notify(Self.callbackKey) }
        let added = deviceIds.count - appended.already.count
        return .added(
            Added(
                push: push, added: added, already: deviceIds.filter { appended.already.contains($0) },
                deliveries: deliveries.count, notSent: notSent, matched: claim.matched + added, open: !close))
    }

    /// Closes an open push: it is done once its deliveries are final. False when it was not open.
    public func close(pushId: String) async throws -> Bool {
        let closed = try await outbox.closePush(pushId: pushId)
        if closed {
            rendezvous.notify(pushId)
            rendezvous.notify(Self.callbackKey)
        }
        return closed
    }

    /// Closes the open pushes idle for longer than `settings.openPushIdle` (the retain stage does, each round).
    func closeIdle() async throws {
        let now = clock.now().timeIntervalSince1970
        let closed = try await bounded { try await self.outbox.closeIdle(now: now) }
        guard !closed.isEmpty else { return }
        logger.notice(
            "open pushes closed: no device was added to them for ENRICH_OPEN_PUSH_IDLE seconds",
            metadata: ["push_ids": "\(closed.joined(separator: ","))", "idle_s": "\(settings.openPushIdle)"])
        for id in closed { rendezvous.notify(id) }
        rendezvous.notify(Self.callbackKey)
    }
}
