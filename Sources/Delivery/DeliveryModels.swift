public import APNsCore
public import EnrichmentCore
public import Essentials

/// Where a device receives pushes: one token of one app in one APNs environment.
public struct TokenRegistration: Sendable, Equatable {
    public var deviceId: String
    /// Hex, lower-case.
    public var token: String
    /// The app's bundle id (the push type's suffix is added when sending).
    public var topic: String
    public var environment: APNsEnvironmentName
    /// When the token was last registered, epoch seconds: a 410 older than this does not deactivate it.
    public var registeredAt: Double
    public var active: Bool
    /// When APNs said the token stopped working (epoch seconds), once deactivated.
    public var invalidatedAt: Double?
    /// APNs's reason for the deactivation (`Unregistered`, `BadDeviceToken`, `DeviceTokenNotForTopic`...).
    public var reason: String?

    public init(
        deviceId: String, token: String, topic: String, environment: APNsEnvironmentName, registeredAt: Double,
        active: Bool = true, invalidatedAt: Double? = nil, reason: String? = nil
    ) {
        self.deviceId = deviceId
        self.token = token
        self.topic = topic
        self.environment = environment
        self.registeredAt = registeredAt
        self.active = active
        self.invalidatedAt = invalidatedAt
        self.reason = reason
    }
}

/// A request to deactivate a registration after an APNs answer, applied only when it still holds.
public struct TokenDeactivation: Sendable, Equatable {
    public var deviceId: String
    public var token: String
    /// APNs's reason.
    public var reason: String
    /// When the token stopped working (APNs's 410 timestamp, else when the answer came), epoch seconds.
    public var invalidatedAt: Double
    /// For 410: the registration is left active when it was registered again after this instant.
    public var unlessRegisteredAfter: Double?
    /// For BadDeviceToken and DeviceTokenNotForTopic: only the registration the push was sent for (same topic and
    /// environment) is deactivated; a registration refreshed with other values is left alone.
    public var onlyFor: (topic: String, environment: APNsEnvironmentName)?

    public init(
        deviceId: String, token: String, reason: String, invalidatedAt: Double, unlessRegisteredAfter: Double? = nil,
        onlyFor: (topic: String, environment: APNsEnvironmentName)? = nil
    ) {
        self.deviceId = deviceId
        self.token = token
        self.reason = reason
        self.invalidatedAt = invalidatedAt
        self.unlessRegisteredAfter = unlessRegisteredAfter
        self.onlyFor = onlyFor
    }

    public static func == (a: TokenDeactivation, b: TokenDeactivation) -> Bool {
        a.deviceId == b.deviceId && a.token == b.token && a.reason == b.reason && a.invalidatedAt == b.invalidatedAt
            && a.unlessRegisteredAfter == b.unlessRegisteredAfter && a.onlyFor?.topic == b.onlyFor?.topic
            && a.onlyFor?.environment == b.onlyFor?.environment
    }
}

/// Who made a push.
public enum PushOrigin: String, Sendable, Equatable {
    /// `POST /v1/push` (or another request of the API): counted toward frequency caps.
    case request
    /// A device entered a region that carries a push: neither capped nor counted.
    case regionEntry = "region_entry"

    /// As stored: NULL for a request (every push made before origins were stored was one).
    public var stored: String? { self == .request ? nil : rawValue }

    /// From the stored value.
    public init(stored: String?) { self = stored.flatMap(PushOrigin.init(rawValue:)) ?? .request }
}

/// One push request as stored: the payload and headers every device of it gets (before enrichment).
public struct PushDefinition: Sendable, Equatable {
    public var id: String
    public var createdAt: Double
    /// The APNs payload as received (a JSON object).
    public var payload: JSONValue
    public var pushType: PushType
    public var priority: APNsPriority?
    /// `apns-expiration`; nil means the header is not sent.
    public var expiration: APNsExpiration?
    public var collapseId: String?
    /// Overrides each registration's topic when set.
    public var topic: String?
    /// Run the enrichment for each device (the default), or send the payload as it is.
    public var enrich: Bool
    /// The body mode for the enrichment; nil means the service's.
    public var mode: BodyMode?
    /// The device ids in request order, as submitted (a stored push read back lists none: its devices are counted
    /// in `PushCounts.matched` and listed page by page).
    public var deviceIds: [String]
    /// The app the push belongs to (its devices' app, `AppNamespace`).
    public var app: String
    /// Deliveries sent per second at most (`rate`), nil: as fast as the wire.
    public var rate: Double?
    /// When and how often it is sent, and what that did at acceptance (nil: at once, uncapped).
    public var plan: PushPlan?
    /// Where the push's report is posted once every delivery is final (nil: nowhere).
    public var callbackURL: String?
    /// Who made it: a request, or the service when a device entered a region with a push; only the former counts
    /// toward a frequency cap (docs/APPS.md).
    public var origin: PushOrigin

    /// When the callback is first looked at: not before the last planned send (a scheduled push is not final
    /// before), nil without a callback.
    public var callbackDueAt: Double? {
        guard callbackURL != nil else { return nil }
        return max(createdAt, plan?.lastSendAt ?? createdAt)
    }

    public init(
        id: String, createdAt: Double, payload: JSONValue, pushType: PushType, priority: APNsPriority? = nil,
        expiration: APNsExpiration? = nil, collapseId: String? = nil, topic: String? = nil, enrich: Bool = true,
        mode: BodyMode? = nil, deviceIds: [String], plan: PushPlan? = nil, callbackURL: String? = nil,
        origin: PushOrigin = .request, app: String? = nil, rate: Double? = nil
    ) {
        self.app = app ?? deviceIds.first.map(AppNamespace.app(of:)) ?? AppNamespace.defaultApp
        self.rate = rate
        self.origin = origin
        self.plan = plan
        self.callbackURL = callbackURL
        self.id = id
        self.createdAt = createdAt
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseId = collapseId
        self.topic = topic
        self.enrich = enrich
        self.mode = mode
        self.deviceIds = deviceIds
    }

    /// True when `apns-expiration` names an instant before `now` (epoch seconds): the push must not be sent.
    public func hasExpired(at now: Double) -> Bool { expiration?.hasPassed(at: now) ?? false }
}

/// Where a delivery stands.
public enum DeliveryState: String, Sendable, CaseIterable {
    /// Committed and waiting for (another) attempt.
    case pending
    /// APNs answered 200.
    case delivered
    /// APNs refused it for good, or every attempt failed.
    case failed
    /// Its `apns-expiration` passed before it could be sent; not sent.
    case expired
    /// Cancelled before it was sent (a scheduled push, `POST /v1/push/{id}/cancel`).
    case cancelled

    public var isFinal: Bool { self != .pending }
}

/// A delivery to be committed with its push.
public struct NewDelivery: Sendable, Equatable {
    public var deviceId: String
    public var token: String
    public var topic: String
    public var environment: APNsEnvironmentName
    /// The `apns-id` sent with every attempt, so APNs and the caller can match them.
    public var apnsId: String
    /// When it is to be sent (epoch seconds); nil: at once. Its maximum age counts from then.
    public var scheduledAt: Double?

    public init(
        deviceId: String, token: String, topic: String, environment: APNsEnvironmentName, apnsId: String,
        scheduledAt: Double? = nil
    ) {
        self.scheduledAt = scheduledAt
        self.deviceId = deviceId
        self.token = token
        self.topic = topic
        self.environment = environment
        self.apnsId = apnsId
    }
}

/// A delivery claimed by a worker for one attempt.
public struct ClaimedDelivery: Sendable, Equatable {
    public var id: Int64
    public var pushId: String
    public var delivery: NewDelivery
    /// Attempts made before this one.
    public var attempts: Int
    /// True when its push was cancelled (`POST /v1/push/{id}/cancel`) after it was committed: it is not sent.
    public var cancelled: Bool

    public init(id: Int64, pushId: String, delivery: NewDelivery, attempts: Int, cancelled: Bool = false) {
        self.cancelled = cancelled
        self.id = id
        self.pushId = pushId
        self.delivery = delivery
        self.attempts = attempts
    }
}

/// What one attempt came to, written back by the worker that claimed the delivery.
public struct DeliveryUpdate: Sendable, Equatable {
    public var id: Int64
    /// `pending` schedules another attempt at `nextAttemptAt`.
    public var state: DeliveryState
    /// Attempts made so far, this one included (0 when expired before any).
    public var attempts: Int
    public var nextAttemptAt: Double?
    public var status: Int?
    public var reason: String?
    /// APNs's 410 timestamp, milliseconds since the epoch.
    public var apnsTimestamp: Int64?
    /// A transport failure or local refusal, in words.
    public var error: String?
    /// The enrichment outcome and rule of the payload this attempt sent.
    public var outcome: String?
    public var rule: String?
    public var finishedAt: Double?

    public init(
        id: Int64, state: DeliveryState, attempts: Int, nextAttemptAt: Double? = nil, status: Int? = nil,
        reason: String? = nil, apnsTimestamp: Int64? = nil, error: String? = nil, outcome: String? = nil,
        rule: String? = nil, finishedAt: Double? = nil
    ) {
        self.id = id
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.status = status
        self.reason = reason
        self.apnsTimestamp = apnsTimestamp
        self.error = error
        self.outcome = outcome
        self.rule = rule
        self.finishedAt = finishedAt
    }
}

/// A device's enrichment verdict for a push (the `/v1/enrich` vocabulary, plus `not_sent`).
public struct DeviceOutcome: Sendable, Equatable {
    public var deviceId: String
    public var outcome: String
    public var rule: String

    public init(deviceId: String, outcome: String, rule: String) {
        self.deviceId = deviceId
        self.outcome = outcome
        self.rule = rule
    }

    /// The outcome of a device that had no active registration when the push was accepted.
    public static func noActiveToken(_ deviceId: String) -> DeviceOutcome {
        DeviceOutcome(deviceId: deviceId, outcome: "not_sent", rule: "no_active_token")
    }
}

/// One delivery as reported to the caller.
public struct DeliveryReport: Sendable, Equatable {
    public var deviceId: String
    public var token: String
    public var environment: APNsEnvironmentName
    public var state: DeliveryState
    public var status: Int?
    public var reason: String?
    public var apnsId: String
    public var apnsTimestamp: Int64?
    public var attempts: Int
    public var error: String?
    /// True when a node took the delivery over from one that stopped (killed, or restarted) while it held it: it
    /// may have been on the wire then, so it was sent again and counted as an attempt.
    public var resentAfterTakeover: Bool
    /// When it is due (a scheduled delivery), epoch seconds.
    public var scheduledAt: Double?

    public init(
        deviceId: String, token: String, environment: APNsEnvironmentName, state: DeliveryState, status: Int?,
        reason: String?, apnsId: String, apnsTimestamp: Int64?, attempts: Int, error: String?,
        resentAfterTakeover: Bool = false, scheduledAt: Double? = nil
    ) {
        self.scheduledAt = scheduledAt
        self.resentAfterTakeover = resentAfterTakeover
        self.deviceId = deviceId
        self.token = token
        self.environment = environment
        self.state = state
        self.status = status
        self.reason = reason
        self.apnsId = apnsId
        self.apnsTimestamp = apnsTimestamp
        self.attempts = attempts
        self.error = error
    }
}

/// Everything known about one push: its devices' outcomes and its deliveries.
public struct PushReport: Sendable {
    public var push: PushDefinition
    /// Per device, in request order; nil outcome while no attempt has enriched it yet.
    public var devices: [(deviceId: String, outcome: String?, rule: String?)]
    public var deliveries: [DeliveryReport]

    public init(
        push: PushDefinition, devices: [(deviceId: String, outcome: String?, rule: String?)],
        deliveries: [DeliveryReport]
    ) {
        self.push = push
        self.devices = devices
        self.deliveries = deliveries
    }

    /// A push's report from its devices as listed and its deliveries in the order they were made. A device whose
    /// deliveries were attempted keeps no outcome of its own (the record stage writes it once, with each
    /// delivery's answer): its outcome and rule are those of its last delivery that has one.
    public init(
        push: PushDefinition, devices: [(deviceId: String, outcome: String?, rule: String?)],
        listed: [ListedDelivery]
    ) {
        var last: [String: (outcome: String, rule: String?)] = [:]
        for delivery in listed {
            guard let outcome = delivery.outcome else { continue }
            last[delivery.report.deviceId] = (outcome, delivery.rule)
        }
        self.init(
            push: push,
            devices: devices.map { device in
                guard device.outcome == nil, let found = last[device.deviceId] else { return device }
                return (device.deviceId, found.outcome, found.rule)
            },
            deliveries: listed.map(\.report))
    }

    /// Deliveries by state (every state present, zero included).
    public var counts: [DeliveryState: Int] {
        var counts = Dictionary(uniqueKeysWithValues: DeliveryState.allCases.map { ($0, 0) })
        for delivery in deliveries { counts[delivery.state, default: 0] += 1 }
        return counts
    }

    /// True when every delivery has a final state.
    public var isDone: Bool { deliveries.allSatisfy { $0.state.isFinal } }
}

/// A stored value the stores cannot read back (written by another version, or edited by hand).
public struct StoredValueError: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

extension PushType {
    /// The push type as a store keeps it (its raw value), read back; throws on a value no version writes.
    public static func stored(_ raw: String) throws(StoredValueError) -> PushType {
        guard let type = PushType(rawValue: raw) else {
            throw StoredValueError("a stored push has push_type '\(raw)', which is not an APNs push type")
        }
        return type
    }
}

extension APNsPriority {
    /// A stored priority, or an error naming the value when it is not one Apple accepts.
    public static func stored(_ raw: Int?) throws(StoredValueError) -> APNsPriority? {
        guard let raw else { return nil }
        guard let priority = APNsPriority(rawValue: raw) else {
            throw StoredValueError("a stored push has priority \(raw), which is not an APNs priority")
        }
        return priority
    }
}

extension APNsExpiration {
    /// A stored expiration, or an error naming the value when it is negative.
    public static func stored(_ raw: Int64?) throws(StoredValueError) -> APNsExpiration? {
        guard let raw else { return nil }
        guard let expiration = APNsExpiration(epochSeconds: raw) else {
            throw StoredValueError("a stored push has expiration \(raw), which is not epoch seconds")
        }
        return expiration
    }
}

/// When a push is sent and how often a device may get one, as asked, and what that came to at acceptance.
public struct PushPlan: Sendable, Equatable {
    public var timing: SendTiming
    /// Devices whose send time quiet hours moved (sent later, not skipped).
    public var held: Int
    /// The earliest and latest send times of its deliveries (epoch seconds), nil when none is scheduled.
    public var firstSendAt: Double?
    public var lastSendAt: Double?

    public init(timing: SendTiming, held: Int = 0, firstSendAt: Double? = nil, lastSendAt: Double? = nil) {
        self.timing = timing
        self.held = held
        self.firstSendAt = firstSendAt
        self.lastSendAt = lastSendAt
    }

    /// The plan once a chunk of devices is enqueued: the chunk's `held` devices added, its send times merged into
    /// the first and last.
    public func merged(held: Int, sendTimes: [Double]) -> PushPlan {
        var plan = self
        plan.held += held
        if let first = sendTimes.min() { plan.firstSendAt = min(plan.firstSendAt ?? first, first) }
        if let last = sendTimes.max() { plan.lastSendAt = max(plan.lastSendAt ?? last, last) }
        return plan
    }

    /// As stored (a JSON object).
    public var stored: JSONValue {
        var object: [String: JSONValue] = [
            "held": .int(Int64(held)), "missing_time_zone": .string(timing.missingZone.rawValue),
        ]
        if let sendAt = timing.sendAt { object["send_at"] = .double(sendAt) }
        if let localTime = timing.localTime { object["local_time"] = .string(localTime.description) }
        if let quiet = timing.quietHours {
            object["quiet_hours"] = .object([
                "window": .string(quiet.window), "action": .string(quiet.action.rawValue),
            ])
        }
        if let cap = timing.cap {
            object["cap"] = .object(["max": .int(Int64(cap.max)), "window_s": .double(cap.window)])
        }
        if let firstSendAt { object["first_send_at"] = .double(firstSendAt) }
        if let lastSendAt { object["last_send_at"] = .double(lastSendAt) }
        return .object(object)
    }

    /// Reads what `stored` wrote.
    public init(stored value: JSONValue) throws {
        guard case .object(let object) = value else { throw StoredValueError("a push plan is not an object") }
        var timing = SendTiming()
        timing.sendAt = object["send_at"]?.lenientDouble
        if let text = object["local_time"]?.stringValue {
            guard let time = LocalTime(parsing: text) else { throw StoredValueError("stored local_time '\(text)'") }
            timing.localTime = time
        }
        if case .object(let quiet)? = object["quiet_hours"] {
            guard let window = quiet["window"]?.stringValue,
                let action = quiet["action"]?.stringValue.flatMap(QuietHours.Action.init(rawValue:)),
                let hours = QuietHours(window: window, action: action)
            else { throw StoredValueError("stored quiet_hours") }
            timing.quietHours = hours
        }
        if case .object(let cap)? = object["cap"] {
            guard let max = cap["max"]?.lenientDouble, let window = cap["window_s"]?.lenientDouble else {
                throw StoredValueError("stored cap")
            }
            timing.cap = FrequencyCap(max: Int(max), window: window)
        }
        timing.missingZone =
            object["missing_time_zone"]?.stringValue.flatMap(SendTiming.MissingZone.init(rawValue:)) ?? .skip
        self.init(
            timing: timing, held: Int(object["held"]?.lenientDouble ?? 0),
            firstSendAt: object["first_send_at"]?.lenientDouble, lastSendAt: object["last_send_at"]?.lenientDouble)
    }
}

/// What a device carries for audiences and timing: its IANA zone and its tags, set at registration.
public struct DeviceProfile: Sendable, Equatable {
    public var timeZone: String?
    public var tags: [String]

    public init(timeZone: String? = nil, tags: [String] = []) {
        self.timeZone = timeZone
        self.tags = tags
    }
}
