public import APNsCore
import Foundation
import NIOConcurrencyHelpers
public import NIOCore
import NIOPosix
public import NIOSSL

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

    public init(
        environment: APNsEnvironment, credentials: APNsCredentials, additionalTrustRootsPEM: String? = nil,
        connections: Int = 1, connectTimeout: TimeAmount = .seconds(5), requestTimeout: TimeAmount = .seconds(30),
        retry: RetryPolicy = RetryPolicy()
    ) {
        self.environment = environment
        self.credentials = credentials
        self.additionalTrustRootsPEM = additionalTrustRootsPEM
        self.connections = max(1, connections)
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.retry = retry
    }
}

/// Sends pushes over HTTP/2 + TLS (swift-nio-http2) with bounded concurrency, retries per Apple's rules, and one
/// JWT per key.
public final class APNsSender: APNsBatchSending {
    public let configuration: APNsSenderConfiguration
    private let connections: [APNsHTTP2Connection]
    private let authority: String

    /// Prepares TLS and the connections (they connect on first use); call `shutdown()` when done.
    public init(configuration: APNsSenderConfiguration) throws {
        self.configuration = configuration
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        if let pem = configuration.additionalTrustRootsPEM {
            tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))]
        }
        if case .certificate(let chain, let key) = configuration.credentials {
            tls.certificateChain = chain.map { .certificate($0) }
            tls.privateKey = .privateKey(key)
        }
        let sslContext = try NIOSSLContext(configuration: tls)
        guard let url = URL(string: configuration.environment.baseURL), url.scheme == "https", let host = url.host
        else {
            throw APNsConfigurationError(
                "the APNs base URL must be https://host[:port], got \(configuration.environment.baseURL)")
        }
        let port = url.port ?? 443
        authority = url.port.map { "\(host):\($0)" } ?? host
        let group = MultiThreadedEventLoopGroup.singleton
        connections = (0..<configuration.connections).map { _ in
            APNsHTTP2Connection(
                eventLoop: group.next(), host: host, port: port, sslContext: sslContext,
                connectTimeout: configuration.connectTimeout)
        }
    }

    /// Closes every connection.
    public func shutdown() async throws {
        for connection in connections { try await connection.close().get() }
    }

    /// Sends one push, retrying 429/5xx/transport failures with backoff (never BadDeviceToken, Unregistered,
    /// ExpiredToken, PayloadTooLarge). An ExpiredProviderToken answer makes a fresh JWT and tries once more.
    public func send(_ request: APNsRequest) async -> APNsSendResult {
        await send([request], concurrency: 1)[0]
    }

    /// Sends to many tokens with at most `concurrency` requests in flight (spread over the connections); results
    /// come back in input order. Requests are issued on the connections' event loops, so the frames of many
    /// pushes share TLS records. Requests that share a payload array share one buffer for every attempt.
    public func send(
        _ requests: [APNsRequest], concurrency: Int,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async -> [APNsSendResult] {
        guard !requests.isEmpty else { return [] }
        let payloads = Self.payloadBuffers(requests)
        let done = NIOLockedValueBox(0)
        let perConnection = max(1, (max(1, concurrency) + connections.count - 1) / connections.count)
        var futures: [EventLoopFuture<[(Int, APNsSendResult)]>] = []
        for (slot, connection) in connections.enumerated() {
            let indices = Array(stride(from: slot, to: requests.count, by: connections.count))
            guard !indices.isEmpty else { continue }
            let run = BulkRun(
                connection: connection, requests: requests, payloads: payloads, indices: indices,
                concurrency: perConnection,
                configuration: configuration, authority: authority
            ) {
                let count = done.withLockedValue {
                    $0 += 1
                    return $0
                }
                progress?(count)
            }
            futures.append(connection.eventLoop.flatSubmit { run.start() })
        }
        var results = [APNsSendResult?](repeating: nil, count: requests.count)
        for future in futures {
            // A BulkRun never fails: every request ends with a result.
            for (index, result) in (try? await future.get()) ?? [] { results[index] = result }
        }
        return results.enumerated().map { index, result in
            result
                ?? APNsSendResult(
                    deviceToken: requests[index].deviceToken, status: nil, reason: nil, apnsID: nil,
                    timestamp: nil, attempts: 0, transportError: "not sent")
        }
    }
}

extension APNsSender {
    /// One buffer per distinct payload storage: a batch's requests share one array, so they share one buffer, and
    /// no attempt copies the payload again.
    static func payloadBuffers(_ requests: [APNsRequest]) -> [ByteBuffer] {
        var buffers: [ByteBuffer] = []
        buffers.reserveCapacity(requests.count)
        var previous: (address: UnsafeRawPointer?, count: Int, buffer: ByteBuffer)?
        for request in requests {
            let address = request.payload.withUnsafeBytes { UnsafeRawPointer($0.baseAddress) }
            if let previous, previous.address == address, previous.count == request.payload.count, address != nil {
                buffers.append(previous.buffer)
            } else {
                let buffer = ByteBuffer(bytes: request.payload)
                previous = (address, request.payload.count, buffer)
                buffers.append(buffer)
            }
        }
        return buffers
    }
}

/// Sends a share of the requests over one connection, keeping `concurrency` in flight, entirely on its event loop.
private final class BulkRun: @unchecked Sendable {
    // Mutable state is touched only on `connection.eventLoop`.
    let connection: APNsHTTP2Connection
    let requests: [APNsRequest]
    let payloads: [ByteBuffer]
    let indices: [Int]
    let concurrency: Int
    let configuration: APNsSenderConfiguration
    let authority: String
    let completed: () -> Void
    private var next = 0
    private var finished = 0
    private var results: [(Int, APNsSendResult)] = []
    private let promise: EventLoopPromise<[(Int, APNsSendResult)]>

    init(
        connection: APNsHTTP2Connection, requests: [APNsRequest], payloads: [ByteBuffer], indices: [Int],
        concurrency: Int, configuration: APNsSenderConfiguration, authority: String, completed: @escaping () -> Void
    ) {
        self.connection = connection
        self.requests = requests
        self.payloads = payloads
        self.indices = indices
        self.concurrency = concurrency
        self.configuration = configuration
        self.authority = authority
        self.completed = completed
        promise = connection.eventLoop.makePromise()
        results.reserveCapacity(indices.count)
    }

    func start() -> EventLoopFuture<[(Int, APNsSendResult)]> {
        for _ in 0..<min(concurrency, indices.count) { launchNext() }
        return promise.futureResult
    }

    private func launchNext() {
        guard next < indices.count else { return }
        let index = indices[next]
        next += 1
        attempt(index, number: 1, refreshedToken: false)
    }

    private func attempt(_ index: Int, number: Int, refreshedToken: Bool) {
        let request = requests[index]
        var authorization: String?
        if case .token(let manager) = configuration.credentials {
            do { authorization = "bearer \(try manager.token())" } catch {
                finish(
                    index,
                    APNsSendResult(
                        deviceToken: request.deviceToken, status: nil, reason: nil, apnsID: nil, timestamp: nil,
                        attempts: number, transportError: "cannot sign the provider token: \(error)"))
                return
            }
        }
        connection.send(
            request, payload: payloads[index], authorization: authorization, baseHost: authority,
            timeout: configuration.requestTimeout
        )
        .whenComplete { result in
            switch result {
            case .success(let response):
                if response.reason == .expiredProviderToken, !refreshedToken,
                    case .token(let manager) = self.configuration.credentials
                {
                    manager.invalidate()
                    self.attempt(index, number: number, refreshedToken: true)
                } else if let delay = self.configuration.retry.delay(
                    afterAttempt: number, status: response.status, reason: response.reason)
                {
                    self.later(delay) { self.attempt(index, number: number + 1, refreshedToken: refreshedToken) }
                } else {
                    self.finish(
                        index,
                        APNsSendResult(
                            deviceToken: request.deviceToken, status: response.status, reason: response.reason,
                            apnsID: response.apnsID, timestamp: response.timestamp, attempts: number,
                            transportError: nil))
                }
            case .failure(let error):
                if let delay = self.configuration.retry.delayAfterTransportError(attempt: number) {
                    self.later(delay) { self.attempt(index, number: number + 1, refreshedToken: refreshedToken) }
                } else {
                    self.finish(
                        index,
                        APNsSendResult(
                            deviceToken: request.deviceToken, status: nil, reason: nil, apnsID: nil,
                            timestamp: nil, attempts: number, transportError: Self.describe(error)))
                }
            }
        }
    }

    private func later(_ seconds: Double, _ body: @escaping @Sendable () -> Void) {
        connection.eventLoop.scheduleTask(in: .nanoseconds(Int64(seconds * 1e9))) { body() }
    }

    private func finish(_ index: Int, _ result: APNsSendResult) {
        results.append((index, result))
        finished += 1
        completed()
        if finished == indices.count {
            promise.succeed(results)
        } else {
            launchNext()
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as NIOSSLError: return "TLS: \(error) (if the host's certificate is not trusted, pass --ca)"
        case let error as BoringSSLError: return "TLS: \(error) (if the host's certificate is not trusted, pass --ca)"
        case is ChannelError: return "connection failed: \(error)"
        case let error as APNsTransportError: return error.description
        default: return "\(error)"
        }
    }
}

/// A sender configuration that cannot work.
public struct APNsConfigurationError: Error, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
