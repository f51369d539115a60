public import APNsCore
public import EnrichmentCore
public import Essentials

// One push request as stored: who made it, its definition, its plan (timing and caps), and the stored values read
// back (`StoredValueError`).

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
