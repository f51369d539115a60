public import Essentials
public import FCMCore
import Foundation
import Synchronization

/// An answer the mock FCM gives one registration token instead of accepting its message.
public struct MockFCMScript: Sendable, Equatable {
    /// The FCM error code to answer with (its HTTP status follows from it).
    public var errorCode: FCMErrorCode
    /// How many messages get this answer before the token is served normally; nil: every one.
    public var times: Int?
    /// `Retry-After` (seconds) on the answer.
    public var retryAfter: Int?
    /// Milliseconds before the answer.
    public var delayMilliseconds: Int

    public init(errorCode: FCMErrorCode, times: Int? = nil, retryAfter: Int? = nil, delayMilliseconds: Int = 0) {
        self.errorCode = errorCode
        self.times = times
        self.retryAfter = retryAfter
        self.delayMilliseconds = delayMilliseconds
    }

    /// Codes a script may name.
    public static let scriptable: [FCMErrorCode] = [
        .unregistered, .invalidArgument, .senderIDMismatch, .quotaExceeded, .unavailable, .internal,
        .thirdPartyAuthError,
    ]

    /// Reads `{"error": "UNREGISTERED", "times": 1, "retry_after": 2, "delay_ms": 0}`.
    public init(json: JSONValue) throws(MockFCMConfigurationError) {
        guard let name = json["error"]?.stringValue,
            let code = Self.scriptable.first(where: { $0.rawValue == name })
        else {
            throw .init("error must be one of \(Self.scriptable.map(\.rawValue).joined(separator: ", "))")
        }
        errorCode = code
        if let value = json["times"] {
            guard case .int(let times) = value, times > 0 else {
                throw .init("times must be a positive integer (omit it for 'always')")
            }
            self.times = Int(times)
        }
        if let value = json["retry_after"] {
            guard case .int(let seconds) = value, (0...3600).contains(seconds) else {
                throw .init("retry_after must be 0 to 3600 seconds")
            }
            retryAfter = Int(seconds)
        }
        delayMilliseconds = 0
        if let value = json["delay_ms"] {
            guard case .int(let delay) = value, (0...60_000).contains(delay) else {
                throw .init("delay_ms must be 0 to 60000")
            }
            delayMilliseconds = Int(delay)
        }
    }

    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "error": .string(errorCode.rawValue), "delay_ms": .int(Int64(delayMilliseconds)),
        ]
        if let times { members["times"] = .int(Int64(times)) }
        if let retryAfter { members["retry_after"] = .int(Int64(retryAfter)) }
        return .object(members)
    }
}

/// A message the mock FCM received, and what it answered.
public struct MockFCMReceived: Sendable, Equatable {
    public var project: String
    /// The request body as sent.
    public var body: [UInt8]
    /// `message` as parsed.
    public var message: JSONValue
    public var status: Int
    public var errorCode: FCMErrorCode?
    public var validateOnly: Bool

    /// `message.token`.
    public var token: String? { message["token"]?.stringValue }
}

/// A mock configuration or script that cannot be used.
public struct MockFCMConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What the mock FCM remembers: the access tokens it issued, the scripts, the messages it received (a ring of
/// `recordCapacity`), and counts. Shared by every connection; safe from any thread.
public final class MockFCMState: Sendable {
    struct Issued {
        var account: String
        var project: String
        var scopes: [String]
        var expiresAt: Int64
    }

    struct Inner {
        var issued: [String: Issued] = [:]
        var scripts: [String: MockFCMScript] = [:]
        var received: [MockFCMReceived] = []
        var next = 0
        var total = 0
        var accepted = 0
        var tokenRequests = 0
        var tokensIssued = 0
        var refuseTokens = false
        var tokenDelayMilliseconds = 0
        var connections = 0
    }

    private let inner = Mutex(Inner())
    public let recordCapacity: Int

    public init(recordCapacity: Int = 100_000) { self.recordCapacity = max(1, recordCapacity) }

    /// Scripts an answer for a registration token.
    public func script(_ token: String, _ script: MockFCMScript) { inner.withLock { $0.scripts[token] = script } }
    public func clearScripts() { inner.withLock { $0.scripts = [:] } }
    public var scripts: [String: MockFCMScript] { inner.withLock { $0.scripts } }

    /// The token endpoint refuses every assertion (`invalid_grant`), as Google does for a deleted key.
    public func setRefuseTokens(_ refuse: Bool) { inner.withLock { $0.refuseTokens = refuse } }
    /// The token endpoint answers after this many milliseconds.
    public func setTokenDelay(milliseconds: Int) { inner.withLock { $0.tokenDelayMilliseconds = max(0, milliseconds) } }
    /// Every access token issued so far stops working (401), as after a revocation.
    public func revokeAccessTokens() { inner.withLock { $0.issued = [:] } }

    /// Messages received, oldest first (at most `recordCapacity`).
    public var received: [MockFCMReceived] {
        inner.withLock { Array($0.received[$0.next...] + $0.received[..<$0.next]) }
    }
    public func clearReceived() {
        inner.withLock {
            $0.received = []
            $0.next = 0
        }
    }

    /// Counts: messages received and accepted, token requests and tokens issued, connections.
    public var counts: (messages: Int, accepted: Int, tokenRequests: Int, tokensIssued: Int, connections: Int) {
        inner.withLock { ($0.total, $0.accepted, $0.tokenRequests, $0.tokensIssued, $0.connections) }
    }

    func noteConnection() { inner.withLock { $0.connections += 1 } }

    func tokenEndpointBehaviour() -> (refuse: Bool, delay: Int) {
        inner.withLock {
            $0.tokenRequests += 1
            return ($0.refuseTokens, $0.tokenDelayMilliseconds)
        }
    }

    func issue(_ token: String, _ issued: Issued) {
        inner.withLock {
            $0.issued[token] = issued
            $0.tokensIssued += 1
        }
    }

    func issued(_ token: String) -> Issued? { inner.withLock { $0.issued[token] } }

    /// The script that applies to a message to `token` now (using one of its `times`).
    func takeScript(for token: String) -> MockFCMScript? {
        inner.withLock { inner in
            guard var script = inner.scripts[token] else { return nil }
            if let times = script.times {
                if times <= 1 {
                    inner.scripts[token] = nil
                } else {
                    script.times = times - 1
                    inner.scripts[token] = script
                }
            }
            return script
        }
    }

    func record(_ message: MockFCMReceived) {
        inner.withLock { inner in
            inner.total += 1
            if message.status == 200 && !message.validateOnly { inner.accepted += 1 }
            if inner.received.count < recordCapacity {
                inner.received.append(message)
            } else {
                inner.received[inner.next] = message
                inner.next = (inner.next + 1) % recordCapacity
            }
        }
    }
}
