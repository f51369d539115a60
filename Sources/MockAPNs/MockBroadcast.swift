import APNsCore
import Essentials
import Foundation
import Synchronization

/// One broadcast channel the mock keeps (iOS 18 broadcast push notifications).
public struct MockChannel: Sendable, Equatable {
    public var id: String
    public var bundleID: String
    /// 0: no message stored; 1: the most recent message stored. Fixed at creation, as at Apple.
    public var messageStoragePolicy: Int
}

/// A broadcast the mock accepted or refused.
public struct ReceivedBroadcast: Sendable, Equatable {
    public var bundleID: String
    public var channelID: String?
    public var pushType: String?
    public var priority: String?
    public var expiration: String?
    public var requestID: String
    public var payload: [UInt8]
    public var status: Int
    public var reason: String?

    var json: JSONValue {
        var members: [String: JSONValue] = [
            "bundle_id": .string(bundleID), "apns_request_id": .string(requestID), "status": .int(Int64(status)),
            "payload_bytes": .int(Int64(payload.count)),
        ]
        if let channelID { members["channel_id"] = .string(channelID) }
        if let pushType { members["push_type"] = .string(pushType) }
        if let priority { members["priority"] = .string(priority) }
        if let expiration { members["expiration"] = .string(expiration) }
        if let reason { members["reason"] = .string(reason) }
        members["payload"] =
            (try? JSONParser.parse(payload, duplicateKeys: .lastWins))
            ?? .string(String(decoding: payload, as: UTF8.self))
        return .object(members)
    }
}

/// The mock's channels (one environment: a mock is either host) and the broadcasts it received.
final class MockChannels: Sendable {
    /// Apple's limit: "up to 10,000 channels for your app in the development and production environment".
    static let limitPerApp = 10_000

    private struct Store {
        var channels: [String: MockChannel] = [:]
        var countByBundle: [String: Int] = [:]
        var broadcasts: [ReceivedBroadcast] = []
    }
    private let store = Mutex(Store())

    /// Creates a channel with a random id (Apple: "you can't request a channel with a specific ID"), or nil when
    /// the app has reached the limit.
    func create(bundleID: String, policy: Int, limit: Int = MockChannels.limitPerApp) -> MockChannel? {
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        let channel = MockChannel(
            id: Data(bytes).base64EncodedString(), bundleID: bundleID, messageStoragePolicy: policy)
        return store.withLock { store in
            guard store.countByBundle[bundleID, default: 0] < limit else { return nil }
            store.countByBundle[bundleID, default: 0] += 1
            store.channels[channel.id] = channel
            return channel
        }
    }

    func channel(_ id: String, bundleID: String) -> MockChannel? {
        store.withLock { $0.channels[id].flatMap { $0.bundleID == bundleID ? $0 : nil } }
    }

    /// Deletes a channel; its id is never handed out again (ids are random).
    func delete(_ id: String, bundleID: String) -> Bool {
        store.withLock { store in
            guard store.channels[id]?.bundleID == bundleID else { return false }
            store.channels.removeValue(forKey: id)
            store.countByBundle[bundleID, default: 1] -= 1
            return true
        }
    }

    func all(bundleID: String) -> [MockChannel] {
        store.withLock { $0.channels.values.filter { $0.bundleID == bundleID }.sorted { $0.id < $1.id } }
    }

    var allChannels: [MockChannel] { store.withLock { $0.channels.values.sorted { $0.id < $1.id } } }

    func record(_ broadcast: ReceivedBroadcast) {
        store.withLock { store in
            if store.broadcasts.count >= 100_000 { store.broadcasts.removeFirst(store.broadcasts.count / 2) }
            store.broadcasts.append(broadcast)
        }
    }

    var broadcasts: [ReceivedBroadcast] { store.withLock { $0.broadcasts } }

    func clear() { store.withLock { $0 = Store() } }
}

/// A channel named by `apns-channel-id`, or why APNs refuses the request.
enum ChannelLookup {
    case found(MockChannel)
    case refused(APNsReason)
}

extension MockAPNsLogic {
    /// A channel id as Apple describes it: base64, of a bounded length (Apple: "don't make assumptions on the
    /// channel ID size"; the mock's are 24 characters, and it refuses anything over 256 as too long).
    static func isWellFormedChannelID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 256 && Data(base64Encoded: text) != nil
    }

    /// The channel management API (`/1/apps/<bundle id>/channels` and `/all-channels`, Apple's
    /// api-manage-broadcast hosts) and broadcasts (`/4/broadcasts/apps/<bundle id>`), with Apple's answers.
    /// `team`: the bundle ids the caller's key or certificate may use (nil: any).
    func broadcastAPI(
        method: String, path: String, headers: [String: String], body: [UInt8], bodyTooLarge: Bool,
        allowedBundles: Set<String>?
    ) -> MockReply {
        // Apple echoes a given apns-request-id, else makes one.
        let requestID = headers["apns-request-id"] ?? UUID().uuidString.lowercased()
        func fail(_ reason: APNsReason) -> MockReply {
            Self.json(
                reason.status, .object(["reason": .string(reason.rawValue)]), headers: [("apns-request-id", requestID)])
        }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // ["", "1", "apps", bundle, "channels" | "all-channels"] or ["", "4", "broadcasts", "apps", bundle]
        let bundleID: String
        let resource: String
        if parts.count == 5, parts[1] == "1", parts[2] == "apps", !parts[3].isEmpty,
            ["channels", "all-channels"].contains(parts[4])
        {
            bundleID = parts[3]
            resource = parts[4]
        } else if parts.count == 5, parts[1] == "4", parts[2] == "broadcasts", parts[3] == "apps", !parts[4].isEmpty {
            bundleID = parts[4]
            resource = "broadcast"
        } else {
            return fail(.badPath)
        }
        // "Ensure that no push type suffix is added to the bundle ID."
        if PushType.allCases.contains(where: { !$0.topicSuffix.isEmpty && bundleID.hasSuffix($0.topicSuffix) }) {
            return fail(.topicDisallowed)
        }
        if let allowedBundles, !allowedBundles.contains(bundleID) { return fail(.topicMismatch) }
        if configuration.broadcastDisabledBundles.contains(bundleID) { return fail(.featureNotEnabled) }
        if bodyTooLarge { return fail(.payloadTooLarge) }
        let channelID = headers["apns-channel-id"]
        func existingChannel() -> ChannelLookup {
            guard let channelID else { return .refused(.missingChannelId) }
            guard Self.isWellFormedChannelID(channelID) else { return .refused(.badChannelId) }
            guard let channel = state.channels.channel(channelID, bundleID: bundleID) else {
                return .refused(.channelNotRegistered)
            }
            return .found(channel)
        }
        let okHeaders = [("apns-request-id", requestID)]
        switch (resource, method) {
        case ("channels", "POST"):
            guard !body.isEmpty else { return fail(.payloadEmpty) }
            guard case .object(let members)? = try? JSONParser.parse(body, duplicateKeys: .lastWins) else {
                return fail(.badRequestPayload)
            }
            if members.keys.contains(where: { !["message-storage-policy", "push-type"].contains($0) }) {
                return fail(.badRequestParams)
            }
            // Apple documents the number 0 or 1; a string of it (node-apn's README sends "1") is read the same.
            let policy: Int64?
            switch members["message-storage-policy"] {
            case .int(let value)?: policy = value
            case .string(let text)?: policy = Int64(text)
            default: policy = nil
            }
            // An absent policy: the reason seen from APNs in the wild (recorded by hapns), not in Apple's table.
            guard members["message-storage-policy"] != nil else {
                return fail(.unknown("MissingChannelQueueSize"))
            }
            guard let policy, policy == 0 || policy == 1 else { return fail(.badRequestParams) }
            guard let pushType = members["push-type"] else { return fail(.missingPushType) }
            // Apple writes "LiveActivity"; node-apn sends "liveactivity": both are read as the one allowed value.
            guard pushType.stringValue?.lowercased() == "liveactivity" else { return fail(.invalidPushType) }
            guard
                let channel = state.channels.create(
                    bundleID: bundleID, policy: Int(policy), limit: configuration.channelLimitPerApp)
            else {
                return fail(.cannotCreateChannelConfig)
            }
            return MockReply(status: 201, headers: okHeaders + [("apns-channel-id", channel.id)], body: nil)
        case ("channels", "GET"):
            switch existingChannel() {
            case .refused(let reason): return fail(reason)
            case .found(let channel):
                return Self.json(
                    200,
                    .object([
                        "message-storage-policy": .int(Int64(channel.messageStoragePolicy)),
                        "push-type": .string("LiveActivity"),
                    ]), headers: okHeaders)
            }
        case ("channels", "DELETE"):
            switch existingChannel() {
            case .refused(let reason): return fail(reason)
            case .found(let channel):
                _ = state.channels.delete(channel.id, bundleID: bundleID)
                return MockReply(status: 204, headers: okHeaders, body: nil)
            }
        case ("all-channels", "GET"):
            return Self.json(
                200, .object(["channels": .array(state.channels.all(bundleID: bundleID).map { .string($0.id) })]),
                headers: okHeaders)
        case ("broadcast", "POST"):
            var broadcast = ReceivedBroadcast(
                bundleID: bundleID, channelID: channelID, pushType: headers["apns-push-type"],
                priority: headers["apns-priority"], expiration: headers["apns-expiration"], requestID: requestID,
                payload: body, status: 200, reason: nil)
            let reason = broadcastViolation(broadcast, channel: existingChannel())
            broadcast.status = reason?.status ?? 200
            broadcast.reason = reason?.rawValue
            state.channels.record(broadcast)
            if let reason { return fail(reason) }
            return MockReply(
                status: 200, headers: okHeaders + [("apns-unique-id", UUID().uuidString.lowercased())], body: nil)
        default:
            return fail(.methodNotAllowed)
        }
    }

    /// Why APNs would refuse a broadcast, in the order Apple's table suggests, or nil.
    ///
    /// Apple's header table calls `apns-expiration` and `apns-priority` required, yet node-apn (the most used
    /// client with broadcasts) omits `apns-expiration` unless set: the mock reads a missing one as 0 and a missing
    /// priority as 10 rather than refuse what APNs is not shown to refuse. `apns-topic`, which Apple's table does
    /// not list and hapns sends anyway, is ignored.
    private func broadcastViolation(_ broadcast: ReceivedBroadcast, channel: ChannelLookup)
        -> APNsReason?
    {
        guard broadcast.channelID != nil else { return .missingChannelId }
        guard let pushType = broadcast.pushType else { return .missingPushType }
        // Apple writes "Liveactivity", "LiveActivity" and "liveactivity" on its pages.
        guard pushType.lowercased() == "liveactivity" else { return .invalidPushType }
        var expiration: Int64 = 0
        if let text = broadcast.expiration {
            guard let value = Int64(text), value >= 0 else { return .badExpirationDate }
            expiration = value
        }
        if let priority = broadcast.priority, !["10", "5", "1"].contains(priority) { return .badPriority }
        let found: MockChannel
        switch channel {
        case .refused(let reason): return reason
        case .found(let channel): found = channel
        }
        // "Providing a nonzero expiration for a channel created with the No Message Stored storage policy results
        // in message rejection."
        if found.messageStoragePolicy == 0, expiration != 0 { return .badExpirationDate }
        guard !broadcast.payload.isEmpty else { return .payloadEmpty }
        guard case .object(let payload)? = try? JSONParser.parse(broadcast.payload, duplicateKeys: .lastWins) else {
            return .badRequestPayload
        }
        // A broadcast updates or ends the activities subscribed to its channel; it cannot start one (a start goes
        // to one device's push-to-start token). Apple documents no reason for this case: the mock answers 400
        // BadRequestPayload, the reason its table gives for a payload it cannot use (docs/LIVE-ACTIVITIES.md).
        if case .object(let aps)? = payload["aps"], aps["event"] == .string("start") { return .badRequestPayload }
        return nil
    }
}
