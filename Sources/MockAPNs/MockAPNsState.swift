public import APNsCore
public import Essentials
import Foundation
import Synchronization

/// A failure the mock answers with for one device token.
public struct FailureScript: Sendable, Equatable {
    /// HTTP status to answer (200 means "succeed, maybe after a delay").
    public var status: Int
    /// Apple's reason string; defaults to the usual one for the status.
    public var reason: String?
    /// How many times to answer this way before succeeding; nil means every time.
    public var times: Int?
    /// Added delay before answering, in milliseconds.
    public var delayMilliseconds: Int
    /// For 410: the time the token became invalid, in milliseconds since the epoch (default: now).
    public var timestamp: Int64?

    public init(
        status: Int, reason: String? = nil, times: Int? = nil, delayMilliseconds: Int = 0, timestamp: Int64? = nil
    ) {
        self.status = status
        self.reason = reason
        self.times = times
        self.delayMilliseconds = delayMilliseconds
        self.timestamp = timestamp
    }

    /// Reads `{"status": 410, "reason": "Unregistered", "times": 1, "delay_ms": 0, "timestamp": ...}`.
    public init(json: JSONValue) throws(MockConfigurationError) {
        guard case .object = json else { throw .init("a failure script must be a JSON object") }
        guard case .int(let status)? = json["status"],
            [200, 400, 403, 404, 405, 410, 413, 429, 500, 503].contains(status)
        else {
            throw .init("status must be one of 200, 400, 403, 404, 405, 410, 413, 429, 500, 503")
        }
        self.status = Int(status)
        reason = json["reason"]?.stringValue
        if case .int(let times)? = json["times"] {
            guard times > 0 else { throw .init("times must be a positive integer (omit it for 'always')") }
            self.times = Int(times)
        }
        if case .int(let delay)? = json["delay_ms"] {
            guard (0...60_000).contains(delay) else { throw .init("delay_ms must be 0 to 60000") }
            delayMilliseconds = Int(delay)
        } else {
            delayMilliseconds = 0
        }
        if case .int(let timestamp)? = json["timestamp"] { self.timestamp = timestamp }
    }

    /// As JSON, in the shape `init(json:)` reads.
    public var json: JSONValue {
        var members: [String: JSONValue] = ["status": .int(Int64(status)), "delay_ms": .int(Int64(delayMilliseconds))]
        if let reason { members["reason"] = .string(reason) }
        if let times { members["times"] = .int(Int64(times)) }
        if let timestamp { members["timestamp"] = .int(timestamp) }
        return .object(members)
    }

    /// The reason sent with a non-200 answer.
    var effectiveReason: String {
        if let reason { return reason }
        switch status {
        case 400: return "BadDeviceToken"
        case 403: return "InvalidProviderToken"
        case 404: return "BadPath"
        case 405: return "MethodNotAllowed"
        case 410: return "Unregistered"
        case 413: return "PayloadTooLarge"
        case 429: return "TooManyRequests"
        case 503: return "ServiceUnavailable"
        default: return "InternalServerError"
        }
    }
}

/// A push the mock received, and what it answered; the request's fields read through (`push.topic`).
@dynamicMemberLookup
public struct ReceivedPush: Sendable, Equatable {
    public var request: APNsWireRequest
    /// The `apns-id` the mock answered with (the request's own, or one it made).
    public var apnsID: String
    public var status: Int
    public var reason: String?
    /// Epoch seconds when it arrived.
    public var receivedAt: Double
    /// The `kid` and `iss` of the provider token it carried, once verified (token authentication).
    public var providerKeyID: String?
    public var providerTeamID: String?

    /// Records `request` with the mock's answer.
    public init(request: APNsWireRequest, apnsID: String, status: Int, reason: String?, receivedAt: Double) {
        self.request = request
        self.apnsID = apnsID
        self.status = status
        self.reason = reason
        self.receivedAt = receivedAt
    }

    /// The request's own fields (`deviceToken`, `topic`, `payload`...).
    public subscript<T>(dynamicMember keyPath: KeyPath<APNsWireRequest, T>) -> T { request[keyPath: keyPath] }

    /// As JSON for the control endpoint.
    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "device_token": .string(request.deviceToken), "apns_id": .string(apnsID), "status": .int(Int64(status)),
            "received_at": .double(receivedAt), "payload_bytes": .int(Int64(request.payload.count)),
        ]
        if let topic = request.topic { members["topic"] = .string(topic) }
        if let pushType = request.pushType { members["push_type"] = .string(pushType) }
        if let priority = request.priority {
            members["priority"] = Int64(priority).map(JSONValue.int) ?? .string(priority)
        }
        if let expiration = request.expiration { members["expiration"] = .string(expiration) }
        if let collapseID = request.collapseID { members["collapse_id"] = .string(collapseID) }
        if let reason { members["reason"] = .string(reason) }
        if let providerKeyID { members["provider_key_id"] = .string(providerKeyID) }
        if let providerTeamID { members["provider_team_id"] = .string(providerTeamID) }
        members["payload"] =
            (try? JSONParser.parse(request.payload, duplicateKeys: .lastWins))
            ?? .string(String(decoding: request.payload, as: UTF8.self))
        return .object(members)
    }
}

/// The mock's scripted failures, its connection behaviour, and its record of received pushes; shared by the server
/// and its control API.
public final class MockAPNsState: Sendable {
    private let scripts = Mutex<[String: FailureScript]>([:])
    private let received: Mutex<PushRecord>
    private let abandoned = Mutex<Int>(0)
    private let currentBehaviour = Mutex(ConnectionBehaviour())
    private let events = Mutex(ConnectionEvents())
    /// Broadcast channels and the broadcasts received.
    let channels = MockChannels()
    /// Most pushes kept; older ones are dropped first.
    public let capacity: Int

    public init(capacity: Int = 100_000, behaviour: ConnectionBehaviour = ConnectionBehaviour()) {
        self.capacity = max(1, capacity)
        received = Mutex(PushRecord(capacity: max(1, capacity)))
        currentBehaviour.withLock { $0 = behaviour }
    }

    /// Scripts a failure for a token (replacing any earlier one).
    public func script(_ script: FailureScript, for token: String) {
        scripts.withLock { $0[token.lowercased()] = script }
    }

    /// Loads scripts from `{"<token>": {"status": ...}, ...}`.
    public func loadScripts(_ document: JSONValue) throws(MockConfigurationError) {
        guard case .object(let entries) = document else {
            throw .init("the scripts file must be a JSON object keyed by device token")
        }
        var parsed: [(String, FailureScript)] = []
        for (token, value) in entries {
            guard APNsValidator.isValidDeviceToken(token) else {
                throw .init("'\(token)' is not a 64-hex device token")
            }
            do { parsed.append((token, try FailureScript(json: value))) } catch {
                throw .init("script for \(token.prefix(8))…: \(error.message)")
            }
        }
        // All or nothing: a bad entry leaves the scripts as they were.
        for (token, script) in parsed { self.script(script, for: token) }
    }

    public func clearScripts() { scripts.withLock { $0.removeAll() } }

    /// Every script, by token.
    public var allScripts: [String: FailureScript] { scripts.withLock { $0 } }

    /// Takes the script for a token, counting down `times`.
    func takeScript(for token: String) -> FailureScript? {
        scripts.withLock { scripts in
            let key = token.lowercased()
            guard var script = scripts[key] else { return nil }
            if let times = script.times {
                if times <= 1 {
                    scripts.removeValue(forKey: key)
                } else {
                    script.times = times - 1
                    scripts[key] = script
                }
            }
            return script
        }
    }

    func record(_ push: ReceivedPush) {
        received.withLock { $0.append(push) }
    }

    /// Everything recorded, oldest first (at most `capacity`).
    public var receivedPushes: [ReceivedPush] { received.withLock { $0.ordered } }
    /// How many pushes arrived since start or the last clear (including records dropped for capacity).
    public var receivedCount: Int { received.withLock { $0.total } }
    /// Forgets the record and resets the count.
    public func clearReceived() { received.withLock { $0 = PushRecord(capacity: capacity) } }

    /// The channels that exist, every app's.
    public var broadcastChannels: [MockChannel] { channels.allChannels }
    /// Broadcasts received (accepted or refused), oldest first.
    public var receivedBroadcasts: [ReceivedBroadcast] { channels.broadcasts }
    /// Creates a channel as `POST /1/apps/<bundle id>/channels` does, under Apple's limit (nil past it).
    public func createChannelForTesting(bundleID: String, policy: Int = 0) -> MockChannel? {
        channels.create(bundleID: bundleID, policy: policy)
    }
    /// Deletes a channel as `DELETE /1/apps/<bundle id>/channels` does.
    public func deleteChannelForTesting(_ id: String, bundleID: String) -> Bool {
        channels.delete(id, bundleID: bundleID)
    }

    /// Streams the client closed (RST_STREAM) before the mock answered, e.g. after the client's own timeout.
    public var abandonedStreams: Int { abandoned.withLock { $0 } }
    func noteAbandonedStream() { abandoned.withLock { $0 += 1 } }

    /// How new connections behave.
    public var behaviour: ConnectionBehaviour {
        get { currentBehaviour.withLock { $0 } }
        set { currentBehaviour.withLock { $0 = newValue } }
    }

    /// What the mock did to connections so far.
    public var connectionEvents: ConnectionEvents { events.withLock { $0 } }
    func noteConnection() { events.withLock { $0.accepted += 1 } }
    func noteGoAway() { events.withLock { $0.goAways += 1 } }
    func noteAbruptClose() { events.withLock { $0.abruptCloses += 1 } }
    func noteSilence() { events.withLock { $0.silenced += 1 } }
}

/// Counts of what the mock did to connections.
public struct ConnectionEvents: Sendable, Equatable {
    public var accepted = 0
    public var goAways = 0
    public var abruptCloses = 0
    public var silenced = 0

    var json: JSONValue {
        .object([
            "accepted": .int(Int64(accepted)), "goaways": .int(Int64(goAways)),
            "abrupt_closes": .int(Int64(abruptCloses)), "silenced": .int(Int64(silenced)),
        ])
    }
}

/// The last `capacity` pushes in a ring: recording costs the same at the millionth push as at the first.
struct PushRecord {
    private var slots: [ReceivedPush] = []
    private var next = 0
    let capacity: Int
    private(set) var total = 0

    init(capacity: Int) { self.capacity = capacity }

    mutating func append(_ push: ReceivedPush) {
        total += 1
        if slots.count < capacity {
            slots.append(push)
        } else {
            slots[next] = push
            next = (next + 1) % capacity
        }
    }

    /// Oldest first.
    var ordered: [ReceivedPush] { Array(slots[next...] + slots[..<next]) }
}

/// A mock configuration or script that cannot be used.
public struct MockConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
