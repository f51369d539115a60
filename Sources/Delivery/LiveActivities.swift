public import APNsCore

/// The two tokens ActivityKit gives an app: one to start an activity of a type by push (iOS 17.2), and one per
/// running activity to update and end it.
public enum ActivityTokenKind: String, Sendable, CaseIterable {
    /// `Activity<Attributes>.pushToStartTokenUpdates`: starts an activity of one attributes type.
    case pushToStart = "push_to_start"
    /// `activity.pushTokenUpdates`: updates and ends one running activity.
    case update
}

/// A Live Activity token a device registered.
public struct ActivityRegistration: Sendable, Equatable {
    public var deviceId: String
    public var kind: ActivityTokenKind
    /// The ActivityAttributes type (`attributes-type` of a start), e.g. `DeliveryAttributes`.
    public var activityType: String
    /// The activity's id (ActivityKit's `Activity.id`) for an update token; nil for a push-to-start token.
    public var activityId: String?
    /// Hex, lower-case.
    public var token: String
    /// The app's bundle id (`.push-type.liveactivity` is added when sending).
    public var topic: String
    public var environment: APNsEnvironmentName
    /// `ActivityAuthorizationInfo().frequentPushesEnabled` as the device last reported it; nil when not reported.
    public var frequentPushesEnabled: Bool?
    public var registeredAt: Double
    /// The newest `aps.timestamp` sent with this token (the phone keeps only the newest update).
    public var lastTimestamp: Int64?
    /// When an `end` was sent (epoch seconds): the activity takes no more updates.
    public var endedAt: Double?
    /// When APNs said the token stopped working (410 Unregistered, ExpiredToken...), and its reason; cleared when
    /// the device registers a token again.
    public var invalidatedAt: Double?
    public var invalidReason: String?

    public init(
        deviceId: String, kind: ActivityTokenKind, activityType: String, activityId: String?, token: String,
        topic: String, environment: APNsEnvironmentName, frequentPushesEnabled: Bool?, registeredAt: Double,
        lastTimestamp: Int64? = nil, endedAt: Double? = nil, invalidatedAt: Double? = nil,
        invalidReason: String? = nil
    ) {
        self.deviceId = deviceId
        self.kind = kind
        self.activityType = activityType
        self.activityId = activityId
        self.token = token
        self.topic = topic
        self.environment = environment
        self.frequentPushesEnabled = frequentPushesEnabled
        self.registeredAt = registeredAt
        self.lastTimestamp = lastTimestamp
        self.endedAt = endedAt
        self.invalidatedAt = invalidatedAt
        self.invalidReason = invalidReason
    }

    /// The key the registration is stored under, besides the device: the activity id, or the type for a
    /// push-to-start token.
    public var key: String { activityId ?? activityType }
}

/// What `ActivityStore.recordSend` decided.
public enum ActivitySendDecision: Sendable, Equatable {
    /// Recorded: the timestamp is the newest, and an `end` marks the activity ended.
    case recorded
    /// Refused: a push with this timestamp or a newer one was already sent (the phone would drop this one).
    case notNewer(last: Int64)
    /// Refused: the activity already ended.
    case ended(at: Double)
    /// No such registration.
    case unknown
}

/// Live Activity tokens per device. Implementations: SQLite, PostgreSQL; one contract suite.
public protocol ActivityStore: Sendable {
    /// Creates or refreshes a registration (token, topic, environment, frequent pushes, `registeredAt`); a new
    /// token for an activity keeps its last timestamp (the phone's order of updates is per activity), while a
    /// new push-to-start token clears its type's (a new token is a new install or device: nothing was started
    /// through it yet). Returns true when it was created.
    func register(_ registration: ActivityRegistration) async throws -> Bool
    /// Every registration of a device: push-to-start tokens by type, then activities by id.
    func registrations(deviceId: String) async throws -> [ActivityRegistration]
    /// One registration.
    func registration(deviceId: String, kind: ActivityTokenKind, key: String) async throws -> ActivityRegistration?
    /// Records that a push with `timestamp` goes out with this registration, only if it is newer than every
    /// earlier one and the activity has not ended; an `end` marks it ended at `now`. Atomic, so that two nodes
    /// cannot both send an older update.
    func recordSend(
        deviceId: String, kind: ActivityTokenKind, key: String, timestamp: Int64, ends: Bool, now: Double
    ) async throws -> ActivitySendDecision
    /// Removes one registration; returns whether it existed.
    func remove(deviceId: String, kind: ActivityTokenKind, key: String) async throws -> Bool
    /// Removes every registration of a device; returns how many.
    func removeDevice(_ deviceId: String) async throws -> Int
    /// Marks the device's registrations with `token` invalid after an APNs answer, unless registered again after
    /// `unlessRegisteredAfter`; returns how many.
    @discardableResult
    func invalidate(deviceId: String, token: String, reason: String, at: Double, unlessRegisteredAfter: Double?)
        async throws -> Int
    /// Undoes a `recordSend` whose push could not be committed: the timestamp goes back to `previous` and the
    /// activity is not ended, only if nothing newer was recorded since. Returns whether it was undone.
    @discardableResult
    func revertSend(deviceId: String, kind: ActivityTokenKind, key: String, timestamp: Int64, previous: Int64?)
        async throws -> Bool
}

/// A broadcast channel (iOS 18) the service made for an app, as it keeps it.
public struct BroadcastChannel: Sendable, Equatable {
    public var channelID: String
    /// The app's bundle id.
    public var bundleID: String
    public var environment: APNsEnvironmentName
    /// 0: no message stored; 1: the most recent message stored (fixed at creation).
    public var storagePolicy: Int
    public var createdAt: Double

    public init(
        channelID: String, bundleID: String, environment: APNsEnvironmentName, storagePolicy: Int, createdAt: Double
    ) {
        self.channelID = channelID
        self.bundleID = bundleID
        self.environment = environment
        self.storagePolicy = storagePolicy
        self.createdAt = createdAt
    }
}

/// The channels the service made, per app and environment. Implementations: SQLite, PostgreSQL.
public protocol ChannelStore: Sendable {
    func add(_ channel: BroadcastChannel) async throws
    /// Channels, oldest first, of one app and environment when given.
    func channels(bundleID: String?, environment: APNsEnvironmentName?) async throws -> [BroadcastChannel]
    func channel(id: String) async throws -> BroadcastChannel?
    /// Removes one; returns whether it existed.
    func remove(id: String) async throws -> Bool
}
