import Foundation

/// One push to one device, typed: what every sender builds (the CLI, the service's delivery) and what the
/// connection writes. Its header values are rendered in one place, `wire`.
public struct APNsRequest: Sendable, Equatable {
    /// The device token. A token that is not an even number of 64 to 200 hex digits is refused locally
    /// (`APNsValidator.localRefusal`) with the answer Apple would give, and never sent.
    public var deviceToken: String
    /// `apns-topic`: the app's bundle id with the push type's suffix (nil: the certificate's topic).
    public var topic: String?
    public var pushType: PushType?
    public var priority: APNsPriority?
    public var expiration: APNsExpiration?
    public var collapseID: String?
    public var apnsID: String?
    /// The payload bytes exactly as sent.
    public var payload: [UInt8]

    public init(
        deviceToken: String, topic: String?, pushType: PushType?, priority: APNsPriority? = nil,
        expiration: APNsExpiration? = nil, collapseID: String? = nil, apnsID: String? = nil, payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
    }

    /// The request path.
    public var path: String { "/3/device/\(deviceToken)" }

    /// The request as it travels: every header value as text.
    public var wire: APNsWireRequest {
        APNsWireRequest(
            deviceToken: deviceToken, topic: topic, pushType: pushType?.rawValue, priority: priority?.headerValue,
            expiration: expiration?.headerValue, collapseID: collapseID, apnsID: apnsID, payload: payload)
    }
}

/// One request as it travels (or as a server receives it): header values as text, exactly as written, so that
/// the mock server can judge any value a client sends, as APNs does. Senders build `APNsRequest` instead.
public struct APNsWireRequest: Sendable, Equatable {
    public var deviceToken: String
    public var topic: String?
    public var pushType: String?
    public var priority: String?
    public var expiration: String?
    public var collapseID: String?
    public var apnsID: String?
    public var payload: [UInt8]

    public init(
        deviceToken: String, topic: String?, pushType: String?, priority: String? = nil, expiration: String? = nil,
        collapseID: String? = nil, apnsID: String? = nil, payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
    }
}

/// `apns-priority`: how soon APNs delivers the push (Apple accepts 10, 5 and 1; a missing header means 10).
public enum APNsPriority: Int, Sendable, CaseIterable, CustomStringConvertible {
    /// 10: deliver now. Not allowed for background pushes.
    case immediately = 10
    /// 5: deliver when the device's power allows; required for background pushes.
    case considerate = 5
    /// 1: deliver when the device's power allows and group with other pushes.
    case low = 1

    /// The values accepted, as a phrase for messages.
    public static let allowedValues = "10, 5 or 1"

    /// The priority named by a header value or a number, or nil when it is not one Apple accepts.
    public init?(header: String) {
        guard let number = Int(header), let priority = APNsPriority(rawValue: number) else { return nil }
        self = priority
    }

    public var headerValue: String { String(rawValue) }
    public var description: String { headerValue }
}

/// `apns-expiration`: until when APNs stores the push for an offline device, in epoch seconds; 0 means deliver
/// once and do not store.
public struct APNsExpiration: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let epochSeconds: Int64

    /// Deliver once, do not store.
    public static let immediately = APNsExpiration(uncheckedEpochSeconds: 0)

    /// Nil for a negative value (Apple refuses it).
    public init?(epochSeconds: Int64) {
        guard epochSeconds >= 0 else { return nil }
        self.epochSeconds = epochSeconds
    }

    private init(uncheckedEpochSeconds: Int64) { epochSeconds = uncheckedEpochSeconds }

    /// The expiration a header value names (digits only), or nil.
    public init?(header: String) {
        guard APNsValidator.expirationProblem(header) == nil, let seconds = Int64(header) else { return nil }
        self.init(epochSeconds: seconds)
    }

    public var headerValue: String { String(epochSeconds) }
    public var description: String { headerValue }

    /// True when this names an instant before `now` (epoch seconds): a push not yet sent must not be sent. 0
    /// ("deliver once") never passes.
    public func hasPassed(at now: Double) -> Bool {
        epochSeconds > 0 && Double(epochSeconds) < now.rounded(.down)
    }

    public static func < (lhs: APNsExpiration, rhs: APNsExpiration) -> Bool { lhs.epochSeconds < rhs.epochSeconds }
}

/// What APNs answered for one push.
public struct APNsResponse: Sendable, Equatable {
    public var status: Int
    public var apnsID: String?
    public var reason: APNsReason?
    /// For 410: when APNs learned the token stopped being valid, in milliseconds since the epoch.
    public var timestamp: Int64?

    public init(status: Int, apnsID: String?, reason: APNsReason?, timestamp: Int64?) {
        self.status = status
        self.apnsID = apnsID
        self.reason = reason
        self.timestamp = timestamp
    }
}
