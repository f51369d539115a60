import Foundation

/// A channel's message storage policy, fixed when the channel is made.
public enum APNsMessageStoragePolicy: Int, Sendable, CaseIterable {
    /// No message stored: a broadcast reaches only devices online now; a higher publishing budget. Broadcasts to
    /// such a channel must have `apns-expiration: 0`.
    case noMessageStored = 0
    /// The most recent message is stored (up to 8 hours) for devices that come online later.
    case mostRecentMessageStored = 1

    /// The flag or JSON spelling: `none` or `most-recent`.
    public var name: String { self == .noMessageStored ? "none" : "most-recent" }

    /// Reads `none` / `most-recent` or Apple's numbers `0` / `1`.
    public init?(name: String) {
        switch name {
        case "none", "0": self = .noMessageStored
        case "most-recent", "1": self = .mostRecentMessageStored
        default: return nil
        }
    }
}

/// APNs refused a channel request or a broadcast: Apple's status and reason, and the request id it answered with.
public struct APNsBroadcastError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var reason: APNsReason
    public var requestID: String?

    public init(status: Int, reason: APNsReason, requestID: String?) {
        self.status = status
        self.reason = reason
        self.requestID = requestID
    }

    public var description: String {
        var text = "APNs answered \(status) \(reason.rawValue)"
        if let hint = reason.hint { text += ": \(hint)" }
        return text
    }
}

/// What APNs answered to a broadcast.
public struct APNsBroadcastAnswer: Sendable, Equatable {
    /// `apns-request-id`: the one sent, or Apple's.
    public var requestID: String?
    /// `apns-unique-id`: Apple's id of the message.
    public var uniqueID: String?

    public init(requestID: String?, uniqueID: String?) {
        self.requestID = requestID
        self.uniqueID = uniqueID
    }
}

/// Apple's channel management API and broadcasts, for one credential in one environment (`APNsBroadcastClient`
/// over HTTP/2; anything else in a test).
public protocol APNsChannelManaging: Sendable {
    func createChannel(bundleID: String, policy: APNsMessageStoragePolicy, requestID: String?) async throws
        -> (channelID: String, requestID: String?)
    func readChannel(bundleID: String, channelID: String, requestID: String?) async throws -> APNsMessageStoragePolicy
    func listChannels(bundleID: String, requestID: String?) async throws -> [String]
    func deleteChannel(bundleID: String, channelID: String, requestID: String?) async throws
    func broadcast(
        bundleID: String, channelID: String, payload: [UInt8], priority: APNsPriority, expiration: Int64,
        requestID: String?
    ) async throws -> APNsBroadcastAnswer
    func shutdown() async throws
}
