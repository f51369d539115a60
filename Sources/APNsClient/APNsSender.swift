import APNsCore
import EnrichmentCore
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// How the sender authenticates.
public enum APNsCredentials: Sendable {
    /// Token (JWT) authentication with a `.p8` key.
    case token(APNsTokenManager)
    /// Certificate authentication: a client certificate chain and its key (from PEM or PKCS#12).
    case certificate(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)
}

/// Sender settings.
public struct APNsSenderConfiguration: Sendable {
    public var environment: APNsEnvironment
    public var credentials: APNsCredentials
    /// Extra CA certificates (PEM) to trust, e.g. the mock's throwaway CA.
    public var additionalTrustRootsPEM: String?
    /// HTTP/2 connections to open; requests are spread over them.
    public var connections: Int
    /// Short on purpose: an untrusted certificate otherwise only shows when the connect timeout expires.
    public var connectTimeout: TimeAmount
    /// Longest wait for one answer.
    public var requestTimeout: TimeAmount
    public var retry: RetryPolicy

    public init(environment: APNsEnvironment, credentials: APNsCredentials, additionalTrustRootsPEM: String? = nil,
                connections: Int = 1, connectTimeout: TimeAmount = .seconds(5), requestTimeout: TimeAmount = .seconds(30),
                retry: RetryPolicy = RetryPolicy()) {
        self.environment = environment
        self.credentials = credentials
        self.additionalTrustRootsPEM = additionalTrustRootsPEM
        self.connections = max(1, connections)
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.retry = retry
    }
}

/// The outcome for one device token.
public struct APNsSendResult: Sendable, Equatable {
    public var deviceToken: String
    /// The final HTTP status, or nil when no answer came (transport failure).
    public var status: Int?
    public var reason: APNsReason?
    public var apnsID: String?
    /// For 410: milliseconds since the epoch when the token stopped being valid.
    public var timestamp: Int64?
    public var attempts: Int
    /// The transport failure, when there was no answer.
    public var transportError: String?

    public init(deviceToken: String, status: Int?, reason: APNsReason?, apnsID: String?, timestamp: Int64?, attempts: Int,
                transportError: String?) {
        self.deviceToken = deviceToken
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.timestamp = timestamp
        self.attempts = attempts
        self.transportError = transportError
    }

    public var succeeded: Bool { status == 200 }

    /// A sentence that helps with this failure, when one applies.
    public var hint: String? { reason?.hint }
}

/// Sends pushes over HTTP/2 + TLS with bounded concurrency, retries per Apple's rules, and one JWT per key.
public final class APNsSender: Sendable {
    public let configuration: APNsSenderConfiguration
    private let clients: [HTTPClient]
    private let nextClient = Mutex(0)

    /// Creates the HTTP clients; call `shutdown()` when done.
    public init(configuration: APNsSenderConfiguration) throws {
        self.configuration = configuration
        var tls = TLSConfiguration.makeClientConfiguration()
        if let pem = configuration.additionalTrustRootsPEM {
            tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))]
        }
        if case .certificate(let chain, let key) = configuration.credentials {
            tls.certificateChain = chain.map { .certificate($0) }
            tls.privateKey = .privateKey(key)
        }
        var http = HTTPClient.Configuration(
            tlsConfiguration: tls,
            timeout: .init(connect: configuration.connectTimeout, read: configuration.requestTimeout))
        http.httpVersion = .automatic
        clients = (0..<configuration.connections).map { _ in
            HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http)
        }
    }

    /// Closes every connection.
    public func shutdown() async throws {
        for client in clients { try await client.shutdown() }
    }

    private func client() -> HTTPClient {
        clients[nextClient.withLock { index in
            defer { index = (index + 1) % clients.count }
            return index
        }]
    }

    /// Sends one push, retrying 429/5xx/transport failures with backoff (never BadDeviceToken, Unregistered,
    /// ExpiredToken, PayloadTooLarge). An ExpiredProviderToken answer makes a fresh JWT and tries once more.
    public func send(_ request: APNsRequest) async -> APNsSendResult {
        var attempt = 0
        var refreshedToken = false
        while true {
            attempt += 1
            do {
                let response = try await sendOnce(request)
                if response.reason == .expiredProviderToken, !refreshedToken, case .token(let manager) = configuration.credentials {
                    manager.invalidate()
                    refreshedToken = true
                    attempt -= 1
                    continue
                }
                if let delay = configuration.retry.delay(afterAttempt: attempt, status: response.status, reason: response.reason) {
                    try? await Task.sleep(for: .seconds(delay))
                    continue
                }
                return APNsSendResult(deviceToken: request.deviceToken, status: response.status, reason: response.reason,
                                      apnsID: response.apnsID, timestamp: response.timestamp, attempts: attempt, transportError: nil)
            } catch {
                if let delay = configuration.retry.delayAfterTransportError(attempt: attempt) {
                    try? await Task.sleep(for: .seconds(delay))
                    continue
                }
                return APNsSendResult(deviceToken: request.deviceToken, status: nil, reason: nil, apnsID: nil, timestamp: nil,
                                      attempts: attempt, transportError: Self.describe(error))
            }
        }
    }

    /// One HTTP exchange.
    func sendOnce(_ request: APNsRequest) async throws -> APNsResponse {
        var http = HTTPClientRequest(url: configuration.environment.baseURL + request.path)
        http.method = .POST
        if case .token(let manager) = configuration.credentials {
            http.headers.add(name: "authorization", value: "bearer \(try manager.token())")
        }
        if let topic = request.topic { http.headers.add(name: "apns-topic", value: topic) }
        if let pushType = request.pushType { http.headers.add(name: "apns-push-type", value: pushType) }
        if let priority = request.priority { http.headers.add(name: "apns-priority", value: String(priority)) }
        if let expiration = request.expiration { http.headers.add(name: "apns-expiration", value: expiration) }
        if let collapseID = request.collapseID { http.headers.add(name: "apns-collapse-id", value: collapseID) }
        if let apnsID = request.apnsID { http.headers.add(name: "apns-id", value: apnsID) }
        http.headers.add(name: "content-type", value: "application/json")
        http.body = .bytes(ByteBuffer(bytes: request.payload))
        let response = try await client().execute(http, timeout: configuration.requestTimeout)
        let body = try await response.body.collect(upTo: 64 * 1024)
        let apnsID = response.headers.first(name: "apns-id")
        guard response.status.code != 200 else {
            return APNsResponse(status: 200, apnsID: apnsID, reason: nil, timestamp: nil)
        }
        var reason: APNsReason?
        var timestamp: Int64?
        if let json = try? JSONParser.parse(Array(body.readableBytesView)) {
            reason = json["reason"]?.stringValue.map(APNsReason.init(rawValue:))
            if case .int(let value)? = json["timestamp"] { timestamp = value }
        }
        return APNsResponse(status: Int(response.status.code), apnsID: apnsID, reason: reason, timestamp: timestamp)
    }

    /// Sends to many tokens with at most `concurrency` requests in flight; results come back in input order.
    public func send(_ requests: [APNsRequest], concurrency: Int,
                     progress: (@Sendable (Int) -> Void)? = nil) async -> [APNsSendResult] {
        var results = [APNsSendResult?](repeating: nil, count: requests.count)
        await withTaskGroup(of: (Int, APNsSendResult).self) { group in
            var next = 0
            var done = 0
            func start() {
                guard next < requests.count else { return }
                let index = next
                next += 1
                group.addTask { (index, await self.send(requests[index])) }
            }
            for _ in 0..<max(1, concurrency) { start() }
            while let (index, result) = await group.next() {
                results[index] = result
                done += 1
                progress?(done)
                start()
            }
        }
        return results.map { $0! }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return "connect timeout (if the host's certificate is not trusted, pass --ca)"
            case .deadlineExceeded, .readTimeout: return "no answer in time"
            default: return "\(error)"
            }
        }
        if let error = error as? NIOSSLError { return "TLS: \(error)" }
        return "\(error)"
    }
}
