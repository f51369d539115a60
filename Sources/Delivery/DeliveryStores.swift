public import EnrichmentCore

/// Where devices receive pushes. Implementations: SQLite (embedded), PostgreSQL (scale-out); one contract suite.
public protocol DeviceTokenStore: DeviceTagSource {
    /// Creates the registration or refreshes it (topic, environment, `registeredAt`, active again); returns true
    /// when it was created.
    func register(_ registration: TokenRegistration) async throws -> Bool
    /// `register` for many registrations in one transaction (an import of an app's tokens); returns how many were
    /// created.
    func registerAll(_ registrations: [TokenRegistration]) async throws -> Int
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
    /// Marks the push cancelled (at once, whatever its size): its resolution stops, a claim of one of its deliveries
    /// says `cancelled` (settled without sending), and `sweepCancelled` turns its pending deliveries `cancelled`.
    /// Returns false when the push is unknown; a second cancel keeps the first instant.
    func markCancelled(pushId: String, at: Double) async throws -> Bool
    /// Turns up to `limit` pending deliveries of cancelled pushes that no worker holds `cancelled`; returns how many.
    func sweepCancelled(at: Double, limit: Int) async throws -> Int
    /// Deliveries of the push held by a claim taken at or before `at` (epoch seconds) with a lease of `lease`: those
    /// that may still go on the wire after a cancel at `at`.
    func claimedBefore(pushId: String, at: Double, lease: Double) async throws -> Int
    /// The app's pushes, newest first: only those still under way (deliveries pending, or resolving) when `active`;
    /// after the push `after` (the cursor: the last id of the page before), at most `limit`.
    func pushes(app: String, active: Bool, after: String?, limit: Int, now: Double) async throws -> [PushStatus]
    /// When the push's earliest pending delivery is due, if any.
    func nextSendAt(pushId: String) async throws -> Double?
    /// Records that the device's notification of the push was shown (a receipt): only for a device the push was
    /// sent to (a delivery accepted by APNs, or on its way).
    func confirm(pushId: String, deviceId: String, at: Double) async throws -> ReceiptOutcome
    /// How many devices confirmed the push.
    func confirmedCount(pushId: String) async throws -> Int
    /// Claims up to `limit` pending deliveries due at `now` that no live lease holds, oldest due first, for `owner`
    /// until `now + lease`.
    func claim(owner: String, limit: Int, now: Double, lease: Double) async throws -> [ClaimedDelivery]
    /// Writes attempts' results (each with its device's enrichment outcome and rule) and releases those claims, in
    /// one transaction. Updates for deliveries `owner` no longer holds are ignored; returns how many were written.
    @discardableResult
    func complete(_ updates: [DeliveryUpdate], owner: String) async throws -> Int
    /// Releases claims so they can be taken at once: every claim when `owner` is nil (one process owns an embedded
    /// store, so after a restart no claim can still be live), else those of `owner`. Returns how many.
    @discardableResult
    func releaseClaims(owner: String?) async throws -> Int
    /// A stored push.
    func push(id: String) async throws -> PushDefinition?
    /// A push with its devices' outcomes and every delivery; nil when unknown. Reads every row of the push: for
    /// the results of a small push (the service lists them up to 1,000 devices).
    func report(pushId: String) async throws -> PushReport?
    /// The push and its counts, kept as deliveries change state: O(1) in its deliveries (plus, for devices with
    /// several tokens, their deliveries; and, while a scheduled or paced push has sends ahead, its pending ones).
    func status(pushId: String, now: Double) async throws -> PushStatus?
    /// One page of the push's deliveries in id order, after the id `after` (the cursor), of `state` when given.
    func deliveries(pushId: String, state: DeliveryState?, after: Int64, limit: Int) async throws -> [ListedDelivery]
    /// Up to `limit` of the push's pending deliveries that were tried (they carry an answer or an error): why the
    /// push is still pending.
    func waiting(pushId: String, limit: Int) async throws -> [DeliveryReport]
    /// How many deliveries of a push are still pending (from its counts), plus one while it is resolving.
    func pendingCount(pushId: String) async throws -> Int
    /// How many deliveries are pending in all (the outbox depth).
    func depth() async throws -> Int
    /// When the earliest pending delivery can next be claimed (epoch seconds), if any: its next attempt time, or
    /// for one held by a lease, the later of that and the end of the lease (a dead holder's claim is taken then).
    func nextDue() async throws -> Double?

    /// Commits a push whose devices are found later (`resolving`): its audience (as the request gave it) is resolved
    /// in the background, chunk by chunk (`claimResolution`, `enqueueChunk`).
    func beginPush(_ push: PushDefinition, audience: String, defaultZone: String?) async throws
    /// Takes up to `limit` pushes still resolving whose resolution no live lease holds, for `owner` until
    /// `now + lease` (a node that stops mid-resolution leaves it to another, or to itself after a restart).
    func claimResolution(owner: String, now: Double, lease: Double, limit: Int) async throws -> [ResolutionClaim]
    /// Commits one resolved chunk (its devices, their outcomes and deliveries, capped when `cap` says) and moves
    /// the push's cursor to `chunk.through`, in one transaction, while `owner` holds the resolution (renewed to
    /// `leaseUntil`). Returns the devices capped, or nil when the chunk was not committed: the lease was lost, or
    /// the push was cancelled (its resolution then ends).
    func enqueueChunk(_ chunk: ResolvedChunk, owner: String, leaseUntil: Double) async throws -> Set<String>?
    /// Commits a push whose devices come in requests (an open push): `resolving` (never done) until `closePush`, or
    /// until `until` (epoch seconds) passes with no device added (`closeIdle`).
    func openPush(_ push: PushDefinition, defaultZone: String?, until: Double) async throws
    /// An open push as a resolution claim (its definition, zone, devices so far, pace); nil when it is not open.
    func openClaim(pushId: String) async throws -> ResolutionClaim?
    /// Adds a chunk of devices to an open push, as `enqueueChunk` does for an audience's, and keeps it open until
    /// `until` (or closes it when `chunk.last`). A device already in the push is left out (a retried request adds
    /// nothing twice). Returns the devices capped and those left out, or nil when the push is not open (closed,
    /// cancelled, unknown): nothing was added.
    func appendChunk(_ chunk: ResolvedChunk, until: Double) async throws -> AppendedChunk?
    /// Closes an open push: no device is added any more, and it is done once its deliveries are final. Returns
    /// false when it was not open.
    func closePush(pushId: String) async throws -> Bool
    /// Closes open pushes whose `until` passed before `now`; returns their ids.
    func closeIdle(now: Double) async throws -> [String]
    /// Deletes up to about `limit` rows of pushes created before `before` that are done (nothing pending, nothing
    /// resolving, no callback still to post): deliveries, devices and receipts first, the push last. Returns how
    /// many rows went (0: nothing is left to delete).
    func retain(before: Double, limit: Int) async throws -> Int
    /// Deletes everything the outbox holds of a device (its deliveries, its place in pushes, its receipts) and
    /// adjusts the pushes' counts; returns how many rows went.
    func deleteDevice(_ deviceId: String) async throws -> Int

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

/// A push whose audience a node is resolving.
public struct ResolutionClaim: Sendable {
    public var push: PushDefinition
    /// The audience as the request gave it (JSON).
    public var audience: String
    /// The last device enqueued (devices are enqueued in ascending order of their stored key), nil before the first.
    public var through: String?
    /// The app's zone for devices without one, when the push's timing asks for it.
    public var defaultZone: String?
    /// Devices enqueued so far.
    public var matched: Int
    /// A paced push: when its next delivery may be due (nil: the first is due at once).
    public var paceNext: Double?

    public init(
        push: PushDefinition, audience: String, through: String?, defaultZone: String?, matched: Int,
        paceNext: Double?
    ) {
        self.push = push
        self.audience = audience
        self.through = through
        self.defaultZone = defaultZone
        self.matched = matched
        self.paceNext = paceNext
    }
}

/// What adding a chunk to an open push came to.
public struct AppendedChunk: Sendable, Equatable {
    /// Devices of the chunk capped (no delivery, rule `capped`).
    public var capped: Set<String>
    /// Devices of the chunk already in the push: left out.
    public var already: Set<String>

    public init(capped: Set<String>, already: Set<String>) {
        self.capped = capped
        self.already = already
    }
}

/// One chunk of a resolved audience, committed with the push's cursor.
public struct ResolvedChunk: Sendable {
    public var pushId: String
    /// The chunk's devices, in order (each after the cursor).
    public var deviceIds: [String]
    /// Devices that get no delivery, with why.
    public var outcomes: [DeviceOutcome]
    public var deliveries: [NewDelivery]
    /// The last device of the chunk: the new cursor.
    public var through: String
    /// True for the last chunk: the push is resolved.
    public var last: Bool
    /// The frequency cap and the app it counts in, if any.
    public var cap: FrequencyCap?
    public var app: String
    /// Devices of the chunk whose send time quiet hours moved, and the chunk's earliest and latest send times
    /// (merged into the push's plan).
    public var held: Int
    public var firstSendAt: Double?
    public var lastSendAt: Double?
    /// A paced push: when the delivery after this chunk's last may be due.
    public var paceNext: Double?

    public init(
        pushId: String, deviceIds: [String], outcomes: [DeviceOutcome], deliveries: [NewDelivery], through: String,
        last: Bool, cap: FrequencyCap?, app: String, held: Int = 0, firstSendAt: Double? = nil,
        lastSendAt: Double? = nil, paceNext: Double? = nil
    ) {
        self.pushId = pushId
        self.deviceIds = deviceIds
        self.outcomes = outcomes
        self.deliveries = deliveries
        self.through = through
        self.last = last
        self.cap = cap
        self.app = app
        self.held = held
        self.firstSendAt = firstSendAt
        self.lastSendAt = lastSendAt
        self.paceNext = paceNext
    }
}

extension ResolvedChunk {
    /// The chunk without the given devices (their outcomes and deliveries too).
    public func leavingOut(_ devices: Set<String>) -> ResolvedChunk {
        var chunk = self
        chunk.deviceIds.removeAll { devices.contains($0) }
        chunk.outcomes.removeAll { devices.contains($0.deviceId) }
        chunk.deliveries.removeAll { devices.contains($0.deviceId) }
        return chunk
    }
}
