public import EnrichmentCore

/// Where devices receive pushes. Implementations: SQLite (embedded), PostgreSQL (scale-out); one contract suite.
public protocol DeviceTokenStore: DeviceTagSource {
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
    /// Sets what the device carries: its zone when `timeZone` is given (`.some(nil)` clears it), its tags when
    /// `tags` is given (replacing them). `removeDevice` removes them too.
    func setProfile(deviceId: String, timeZone: String??, tags: [String]?, at: Double) async throws
    /// `setProfile` for many devices in one transaction (an import of a population's tags); a device listed twice
    /// ends with its last entry.
    func setProfiles(_ changes: [ProfileChange], at: Double) async throws
    /// The profiles of the listed devices (devices with neither zone nor tags are absent).
    func profiles(deviceIds: [String]) async throws -> [String: DeviceProfile]
}

/// What `setProfiles` sets on one device (nil leaves that part as it is; a zone of `.some(nil)` clears it).
public struct ProfileChange: Sendable {
    public var deviceId: String
    public var timeZone: String??
    public var tags: [String]?

    public init(deviceId: String, timeZone: String?? = nil, tags: [String]? = nil) {
        self.deviceId = deviceId
        self.timeZone = timeZone
        self.tags = tags
    }
}

extension DeviceTokenStore {
    public func setProfile(deviceId: String, timeZone: String??, tags: [String]?, at: Double) async throws {
        try await setProfiles([ProfileChange(deviceId: deviceId, timeZone: timeZone, tags: tags)], at: at)
    }
}

/// The durable outbox: pushes and their deliveries, committed before the service answers, drained by workers.
///
/// A worker claims due deliveries with a lease; a claim not completed before its lease ends can be claimed again
/// (by this node after a restart, or by another node), which is what makes delivery at-least-once.
public protocol OutboxStore: Sendable {
    /// Commits a push, its devices (with outcomes already known, e.g. no active token) and its deliveries in one
    /// transaction; deliveries are due at once.
    func enqueue(_ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery]) async throws
    /// `enqueue`, with a frequency cap: a device that already has `cap.max` pushes sent or scheduled within
    /// `cap.window` seconds before or after this push's send time to it gets none of its deliveries (outcome
    /// `not_sent`, rule `capped`). Pushes are counted per device (a device with two tokens counts a push once), in
    /// the state delivered or pending, and only those a person sees that a request made: not Live Activity
    /// events, not background pushes, not region-entry pushes (`PushOrigin.regionEntry`). `plan` makes the push's plan once the capped devices are known. Pushes to one app are capped one at a time (across nodes with PostgreSQL),
    /// so two concurrent pushes cannot both slip under the cap. Returns the devices capped.
    func enqueue(
        _ push: PushDefinition, outcomes: [DeviceOutcome], deliveries: [NewDelivery], cap: FrequencyCap, app: String,
        plan: @Sendable (Set<String>) -> PushPlan?
    ) async throws -> Set<String>
    /// Cancels the push's pending deliveries that no worker holds (state `cancelled`); returns how many.
    func cancel(pushId: String, at: Double) async throws -> Int
    /// The app's pushes with deliveries still pending, soonest first: (push id, pending deliveries, next send time).
    func scheduled(app: String, limit: Int) async throws -> [(pushId: String, pending: Int, nextAt: Double)]
    /// Records that the device's notification of the push was shown (a receipt): only for a device the push was
    /// sent to (a delivery accepted by APNs, or on its way).
    func confirm(pushId: String, deviceId: String, at: Double) async throws -> ReceiptOutcome
    /// How many devices confirmed the push.
    func confirmedCount(pushId: String) async throws -> Int
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
    /// How many deliveries of a push are still pending.
    func pendingCount(pushId: String) async throws -> Int
    /// How many deliveries are pending in all (the outbox depth).
    func depth() async throws -> Int
    /// When the earliest pending delivery can next be claimed (epoch seconds), if any: its next attempt time, or
    /// for one held by a lease, the later of that and the end of the lease (a dead holder's claim is taken then).
    func nextDue() async throws -> Double?

    /// Pushes whose callback is due at `now` and whose deliveries are all final, at most `limit`.
    func callbacksDue(now: Double, limit: Int) async throws -> [PushCallbackDue]
    /// Takes a due callback until `until` (no node takes it meanwhile); false when another node took it first or
    /// it is no longer due.
    func claimCallback(pushId: String, now: Double, until: Double) async throws -> Bool
    /// Records an attempt of a push's callback: `outcome` (`sent`, or why it failed), and when to try again (nil:
    /// never: it was sent, or given up).
    func recordCallback(pushId: String, at: Double, outcome: String, retryAt: Double?) async throws
    /// A push's callback: its URL, attempts so far, last outcome and when it was last tried (nil: the push has none).
    func callbackStatus(pushId: String) async throws -> PushCallbackStatus?
}

/// A push whose callback is due.
public struct PushCallbackDue: Sendable, Equatable {
    public var pushId: String
    public var url: String
    public var attempts: Int

    public init(pushId: String, url: String, attempts: Int) {
        self.pushId = pushId
        self.url = url
        self.attempts = attempts
    }
}

/// Where a push's callback stands.
public struct PushCallbackStatus: Sendable, Equatable {
    public var url: String
    public var attempts: Int
    /// `sent`, why the last attempt failed, or nil before the first attempt.
    public var outcome: String?
    public var lastAttemptAt: Double?
    /// Nil once sent or given up.
    public var nextAttemptAt: Double?

    public init(url: String, attempts: Int, outcome: String?, lastAttemptAt: Double?, nextAttemptAt: Double?) {
        self.url = url
        self.attempts = attempts
        self.outcome = outcome
        self.lastAttemptAt = lastAttemptAt
        self.nextAttemptAt = nextAttemptAt
    }

    /// `waiting` (deliveries not final yet, or not tried), `retrying`, `sent` or `failed` (given up).
    public var state: String {
        if outcome == "sent" { return "sent" }
        if nextAttemptAt == nil { return "failed" }
        return attempts == 0 ? "waiting" : "retrying"
    }
}

/// What a receipt came to.
public enum ReceiptOutcome: Sendable, Equatable {
    /// Recorded now.
    case recorded
    /// The device had confirmed the push already.
    case already
    /// The push was not sent to the device (capped, skipped, cancelled, failed, or not one of its devices).
    case notSent
}
