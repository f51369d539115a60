import Foundation

/// One push to one device, as it goes on the wire.
public struct APNsRequest: Sendable, Equatable {
    /// The device token: hex, an even number of 64 to 200 digits (usually 64).
    public var deviceToken: String
    public var topic: String?
    /// The raw `apns-push-type` header (kept as text so an unknown value can be sent and rejected).
    public var pushType: String?
    public var priority: Int?
    public var expiration: String?
    public var collapseID: String?
    public var apnsID: String?
    /// The payload bytes exactly as sent.
    public var payload: [UInt8]

    public init(
        deviceToken: String, topic: String?, pushType: String?, priority: Int? = nil, expiration: String? = nil,
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

    /// The request path.
    public var path: String { "/3/device/\(deviceToken)" }
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
