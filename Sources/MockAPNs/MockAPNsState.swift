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
    public var request: APNsRequest
    /// The `apns-id` the mock answered with (the request's own, or one it made).
    public var apnsID: String
    public var status: Int
    public var reason: String?
    /// Epoch seconds when it arrived.
    public var receivedAt: Double

    /// Records `request` with the mock's answer.
    public init(request: APNsRequest, apnsID: String, status: Int, reason: String?, receivedAt: Double) {
        self.request = request
        self.apnsID = apnsID
        self.status = status
        self.reason = reason
        self.receivedAt = receivedAt
    }

    /// The request's own fields (`deviceToken`, `topic`, `payload`...).
    public subscript<T>(dynamicMember keyPath: KeyPath<APNsRequest, T>) -> T { request[keyPath: keyPath] }

    /// As JSON for the control endpoint.
    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "device_token": .string(request.deviceToken), "apns_id": .string(apnsID), "status": .int(Int64(status)),
            "received_at": .double(receivedAt), "payload_bytes": .int(Int64(request.payload.count)),
        ]
        if let topic = request.topic { members["topic"] = .string(topic) }
        if let pushType = request.pushType { members["push_type"] = .string(pushType) }
        if let priority = request.priority { members["priority"] = .int(Int64(priority)) }
        if let expiration = request.expiration { members["expiration"] = .string(expiration) }
        if let collapseID = request.collapseID { members["collapse_id"] = .string(collapseID) }
        if let reason { members["reason"] = .string(reason) }
        members["payload"] =
            (try? JSONParser.parse(request.payload))
            ?? .string(String(decoding: request.payload, as: UTF8.self))
        return .object(members)
    }
}

/// The mock's scripted failures and its record of received pushes; shared by the server and its control API.
public final class MockAPNsState: Sendable {
    private let scripts = Mutex<[String: FailureScript]>([:])
    private let received = Mutex<[ReceivedPush]>([])
    private let counter = Mutex<Int>(0)
    private let abandoned = Mutex<Int>(0)
    /// Most pushes kept; older ones are dropped first.
    public let capacity: Int

    public init(capacity: Int = 100_000) { self.capacity = capacity }

    /// Scripts a failure for a token (replacing any earlier one).
    public func script(_ script: FailureScript, for token: String) {
        scripts.withLock { $0[token.lowercased()] = script }
    }

    /// Loads scripts from `{"<token>": {"status": ...}, ...}`.
    public func loadScripts(_ document: JSONValue) throws(MockConfigurationError) {
        guard case .object(let entries) = document else {
            throw .init("the scripts file must be a JSON object keyed by device token")
        }
        for (token, value) in entries {
            guard APNsValidator.isValidDeviceToken(token) else {
                throw .init("'\(token)' is not a 64-hex device token")
            }
            do { script(try FailureScript(json: value), for: token) } catch {
                throw .init("script for \(token.prefix(8))…: \(error.message)")
            }
        }
    }

    public func clearScripts() { scripts.withLock { $0.removeAll() } }

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
        received.withLock { received in
            if received.count >= capacity { received.removeFirst(received.count - capacity + 1) }
            received.append(push)
        }
        counter.withLock { $0 += 1 }
    }

    /// Everything recorded, oldest first.
    public var receivedPushes: [ReceivedPush] { received.withLock { $0 } }
    /// How many pushes arrived since start (including dropped records).
    public var receivedCount: Int { counter.withLock { $0 } }
    public func clearReceived() { received.withLock { $0.removeAll() } }

    /// Streams the client closed (RST_STREAM) before the mock answered, e.g. after the client's own timeout.
    public var abandonedStreams: Int { abandoned.withLock { $0 } }
    func noteAbandonedStream() { abandoned.withLock { $0 += 1 } }
}

/// A mock configuration or script that cannot be used.
public struct MockConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
