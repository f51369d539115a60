/// Where devices receive pushes. Implementations: SQLite (embedded), PostgreSQL (scale-out); one contract suite.
public protocol DeviceTokenStore: Sendable {
    /// Creates the registration or refreshes it (topic, environment, `registeredAt`, active again); returns true
    /// when it was created.
    func register(_ registration: TokenRegistration) async throws -> Bool
    /// Every registration of a device, active or not, oldest registration first.
    func registrations(deviceId: String) async throws -> [TokenRegistration]
    /// The active registrations of each listed device (devices with none are absent).
    func activeRegistrations(deviceIds: [String]) async throws -> [String: [TokenRegistration]]
    /// Removes one registration; returns whether it existed.
    func remove(deviceId: String, token: String) async throws -> Bool
    /// Removes every registration of a device; returns how many.
    func removeDevice(_ deviceId: String) async throws -> Int
    /// Deactivates a registration when the deactivation's conditions hold; returns the registration as
    /// deactivated, or nil when it was left alone (re-registered after a 410, refreshed, removed, or inactive).
    func deactivate(_ deactivation: TokenDeactivation) async throws -> TokenRegistration?
}

/// The durable outbox: pushes and their deliveries, committed before the service answers, drained by workers.
///
/// A worker claims due deliveries with a lease; a claim not completed before its lease ends can be claimed again
/// (by this node after a restart, or by another node), which is what makes delivery at-least-once.
public protocol OutboxStore: Sendable {
    /// Commits a push, its devices (with outcomes already known, e.g. no active token) and its deliveries in one
    /// transaction; deliveries are due at once.
    func enqueue(_ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery]) async throws
    /// Claims up to `limit` pending deliveries due at `now` that no live lease holds, oldest due first, for `owner`
    /// until `now + lease`.
    func claim(owner: String, limit: Int, now: Double, lease: Double) async throws -> [ClaimedDelivery]
    /// Writes attempts' results and devices' outcomes, and releases those claims, in one transaction. Updates for
    /// deliveries `owner` no longer holds are ignored; returns how many were written.
    @discardableResult
    func complete(_ updates: [DeliveryUpdate], outcomes: [(pushId: String, outcome: DeviceOutcome)], owner: String)
        async throws -> Int
    /// Releases claims so they can be taken at once: every claim when `owner` is nil (one process owns an embedded
    /// store, so after a restart no claim can still be live), else those of `owner`. Returns how many.
    @discardableResult
    func releaseClaims(owner: String?) async throws -> Int
    /// A stored push.
    func push(id: String) async throws -> PushDefinition?
    /// A push with its devices' outcomes and every delivery; nil when unknown.
    func report(pushId: String) async throws -> PushReport?
    /// A push's deliveries by state (every state present, zero included); nil when the push is unknown.
    func counts(pushId: String) async throws -> [DeliveryState: Int]?
    /// How many deliveries of a push are still pending.
    func pendingCount(pushId: String) async throws -> Int
    /// How many deliveries are pending in all (the outbox depth).
    func depth() async throws -> Int
    /// When the earliest pending delivery can next be claimed (epoch seconds), if any: its next attempt time, or
    /// for one held by a lease, the later of that and the end of the lease (a dead holder's claim is taken then).
    func nextDue() async throws -> Double?
}
