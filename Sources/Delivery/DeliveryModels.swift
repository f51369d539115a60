public import APNsCore

// A push's deliveries: their states, one as committed, claimed and updated, a device's outcome, and the reports
// read back. Registrations are in TokenRegistration.swift, the push itself in PushDefinition.swift.

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
