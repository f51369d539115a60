public import APNsCore
import Foundation
import NIOConcurrencyHelpers
public import NIOCore
import NIOPosix
public import NIOSSL
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
    /// HTTP/2 connections kept open; requests go to the one with the most free streams.
    public var connections: Int
    /// Event loops (threads) the connections are spread over: each loop drives its own connections, its own
    /// writes and flushes. 0 means one per core (`System.coreCount`); never more loops than connections.
    public var eventLoops: Int
    /// Short on purpose: an unreachable host otherwise holds every push until it expires.
    public var connectTimeout: TimeAmount
    /// Longest wait for one answer; a request that times out has its stream reset.
    public var requestTimeout: TimeAmount
    /// A connection that received nothing for this long sends a PING.
    public var pingInterval: TimeAmount
    /// A PING unanswered for this long means the connection is dead: it is replaced and its pushes go again.
    public var pingTimeout: TimeAmount
    public var retry: RetryPolicy
    /// What the user sets to change the host, the trust and the client certificate, for the hints of connection
    /// errors: `push-sender`'s flags by default; the service names its variables.
    public var settingNames = APNsSettingNames.flags

    public init(
        environment: APNsEnvironment, credentials: APNsCredentials, additionalTrustRootsPEM: String? = nil,
        connections: Int = 1, eventLoops: Int = 0, connectTimeout: TimeAmount = .seconds(5),
        requestTimeout: TimeAmount = .seconds(30), pingInterval: TimeAmount = .seconds(60),
        pingTimeout: TimeAmount = .seconds(10), retry: RetryPolicy = RetryPolicy()
    ) {
        self.environment = environment
        self.credentials = credentials
        self.additionalTrustRootsPEM = additionalTrustRootsPEM
        self.connections = max(1, connections)
        self.eventLoops = max(0, eventLoops)
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.retry = retry
    }
}

/// What the user sets to choose the APNs host, the trust and the credentials (`push-sender`'s flags, or the
/// service's variables), so that a credential or connection error names the one to change.
public struct APNsSettingNames: Sendable {
    public var host: String
    public var trust: String
    public var certificate: String
    public var certificateKey: String
    public var pkcs12: String
    /// Where a `.p8` token key belongs, with its companions.
    public var tokenKey: String

    public init(
        host: String, trust: String, certificate: String, certificateKey: String, pkcs12: String, tokenKey: String
    ) {
        self.host = host
        self.trust = trust
        self.certificate = certificate
        self.certificateKey = certificateKey
        self.pkcs12 = pkcs12
        self.tokenKey = tokenKey
    }

    /// The settings of certificate authentication, for a hint.
    public var clientCertificate: String { "\(certificate) and \(certificateKey) (or \(pkcs12))" }

    /// `push-sender send`'s flags.
    public static let flags = APNsSettingNames(
        host: "--host (or --sandbox / --production)", trust: "--ca", certificate: "--cert",
        certificateKey: "--cert-key",
        pkcs12: "--p12", tokenKey: "--key (with --key-id and --team-id)")

    /// The service's variables; `environment` is `sandbox` or `production`.
    public static func service(environment: String) -> APNsSettingNames {
        APNsSettingNames(
            host: environment == "production" ? "ENRICH_APNS_PRODUCTION_URL" : "ENRICH_APNS_SANDBOX_URL",
            trust: "ENRICH_APNS_CA", certificate: "ENRICH_APNS_CERT", certificateKey: "ENRICH_APNS_CERT_KEY",
            pkcs12: "ENRICH_APNS_P12",
            tokenKey: "ENRICH_APNS_KEY_FILE (with ENRICH_APNS_KEY_ID and ENRICH_APNS_TEAM_ID)")
    }
}

/// Sends pushes over HTTP/2 + TLS (swift-nio-http2, frame by frame) with bounded concurrency, retries per Apple's
/// rules, one JWT per key, and connections that are replaced before they go away.
///
/// The connections are spread over event loops, one pool of connections per loop (a shard): a batch is split
/// between the shards, so that each core encodes, writes and reads its own connections' frames.
public final class APNsSender: APNsBatchSending {
    public let configuration: APNsSenderConfiguration
    private let pools: [APNsConnectionPool]
    /// Where the next lone push goes (round robin over the shards).
    private let nextShard = Atomic<Int>(0)

    /// Prepares TLS and the pool (connections open on first use); call `shutdown()` when done.
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
        let loops = Self.distinctLoops(
            min(configuration.connections, configuration.eventLoops == 0 ? System.coreCount : configuration.eventLoops))
        pools = loops.indices.map { shard in
            // The connections dealt out over the shards as evenly as they go.
            var share = configuration
            share.connections =
                configuration.connections / loops.count + (shard < configuration.connections % loops.count ? 1 : 0)
            return APNsConnectionPool(
                loop: loops[shard], host: host, port: port, authority: url.port.map { "\(host):\($0)" } ?? host,
                sslContext: sslContext, configuration: share)
        }
    }

    /// `count` different event loops of the process's shared group (as many as it has, at most).
    static func distinctLoops(_ count: Int) -> [any EventLoop] {
        let group = MultiThreadedEventLoopGroup.singleton
        var loops: [any EventLoop] = []
        for loop in group.makeIterator() where loops.count < max(1, count) { loops.append(loop) }
        return loops.isEmpty ? [group.next()] : loops
    }

    /// How many event loops the connections are spread over.
    public var shardCount: Int { pools.count }

    /// Closes every connection; pushes not yet answered fail.
    public func shutdown() async throws {
        for pool in pools { try await pool.shutdown().get() }
    }

    /// What the connections went through so far (GOAWAYs, resends, losses, timeouts).
    public func connectionsOpened() async -> Int { await statistics().connectionsOpened }

    public func statistics() async -> APNsSenderStatistics {
        var total = APNsSenderStatistics()
        for pool in pools {
            guard let part = try? await pool.loop.submit({ pool.statistics }).get() else { continue }
            total.add(part)
        }
        return total
    }

    /// Sends one push, retrying 429/5xx/transport failures with backoff (never BadDeviceToken, Unregistered,
    /// ExpiredToken, PayloadTooLarge). An ExpiredProviderToken answer makes a fresh JWT and tries once more.
    public func send(_ request: APNsRequest) async -> APNsSendResult {
        await send([request], concurrency: 1)[0]
    }

    /// Sends to many tokens with at most `concurrency` in flight; results come back in input order.
    public func send(
        _ requests: [APNsRequest], concurrency: Int,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async -> [APNsSendResult] {
        let collected = ResultCollector(count: requests.count)
        await send(requests, concurrency: concurrency) { index, result in
            let done = collected.set(index, result)
            progress?(done)
        }
        return collected.results(for: requests)
    }

    /// Sends to many tokens with at most `concurrency` in flight, handing each result to `onResult` (on the
    /// sender's event loop; keep it short) as soon as it is final, so a large run need not hold its results.
    /// Several calls may run at once; they share the connections.
    ///
    /// A request with a header value that breaks a rule, or a token that cannot be a path, is answered at once
    /// with the status and reason Apple gives for that rule (`attempts` 0, `transportError` saying it was not
    /// sent) and never written to a connection: the connections are shared, and one bad value must not make the
    /// peer close a connection that other pushes are using.
    public func send(
        _ requests: [APNsRequest], concurrency: Int,
        onResult: @escaping @Sendable (Int, APNsSendResult) -> Void
    ) async {
        var sendable: [Int] = []
        sendable.reserveCapacity(requests.count)
        // A batch shares its headers but for the apns-id, which is each delivery's own: each distinct set of the
        // shared ones is judged once, the apns-id on its own (a cheap shape check).
        var judged: (headers: HeaderValues, violation: APNsValidator.Violation?)?
        for (index, request) in requests.enumerated() {
            let headers = HeaderValues(request)
            let headerViolation: APNsValidator.Violation?
            if let judged, judged.headers == headers {
                headerViolation = judged.violation
            } else {
                var shared = request
                shared.apnsID = nil
                headerViolation = APNsValidator.headerViolation(of: shared)
                judged = (headers, headerViolation)
            }
            let refusal =
                headerViolation ?? APNsValidator.apnsIDViolation(request.apnsID)
                ?? APNsValidator.localRefusal(pathOf: request)
            if let refusal {
                onResult(
                    index,
                    APNsSendResult(
                        deviceToken: request.deviceToken, status: refusal.status, reason: refusal.reason, apnsID: nil,
                        timestamp: nil, attempts: 0, transportError: "not sent: \(refusal.message)"))
            } else {
                sendable.append(index)
            }
        }
        if sendable.count < requests.count {
            guard !sendable.isEmpty else { return }
            let indices = sendable
            await sendChecked(indices.map { requests[$0] }, concurrency: concurrency) { position, result in
                onResult(indices[position], result)
            }
        } else {
            await sendChecked(requests, concurrency: concurrency, onResult: onResult)
        }
    }

    /// Splits the requests between the shards in contiguous slices (the concurrency too), each slice a batch of
    /// its shard's pool; a lone push goes to the next shard in turn.
    private func sendChecked(
        _ requests: [APNsRequest], concurrency: Int,
        onResult: @escaping @Sendable (Int, APNsSendResult) -> Void
    ) async {
        let shards = min(pools.count, requests.count)
        let first = shards == 1 ? nextShard.wrappingAdd(1, ordering: .relaxed).oldValue : 0
        var futures: [EventLoopFuture<Void>] = []
        for shard in 0..<shards {
            let pool = pools[(first + shard) % pools.count]
            let range = (requests.count * shard / shards)..<(requests.count * (shard + 1) / shards)
            let offset = range.lowerBound
            let promise = pool.loop.makePromise(of: Void.self)
            let share: Int = max(1, (concurrency + shards - 1) / shards)
            let payloads: [ByteBuffer] = Self.payloadBuffers(requests[range])
            let report: @Sendable (Int, APNsSendResult) -> Void = { index, result in onResult(offset + index, result) }
            let batch = PushBatch(
                requests: requests, range: range, payloads: payloads, concurrency: share, promise: promise,
                onResult: report)
            pool.loop.execute { pool.submit(batch) }
            futures.append(promise.futureResult)
        }
        // Every request ends with a result: the promises only succeed.
        for future in futures { try? await future.get() }
    }
}

/// The values of a request that become headers shared by a batch (all but the apns-id), to judge them once.
private struct HeaderValues: Equatable {
    var topic: String?
    var pushType: PushType?
    var priority: APNsPriority?
    var expiration: APNsExpiration?
    var collapseID: String?

    init(_ request: APNsRequest) {
        topic = request.topic
        pushType = request.pushType
        priority = request.priority
        expiration = request.expiration
        collapseID = request.collapseID
    }
}

/// Results of one `send` call as they arrive, in input order at the end.
private final class ResultCollector: Sendable {
    private let state: NIOLockedValueBox<(results: [APNsSendResult?], done: Int)>

    init(count: Int) { state = NIOLockedValueBox((Array(repeating: nil, count: count), 0)) }

    func set(_ index: Int, _ result: APNsSendResult) -> Int {
        state.withLockedValue {
            $0.results[index] = result
            $0.done += 1
            return $0.done
        }
    }

    func results(for requests: [APNsRequest]) -> [APNsSendResult] {
        state.withLockedValue { state in
            state.results.enumerated().map { index, result in
                result
                    ?? APNsSendResult(
                        deviceToken: requests[index].deviceToken, status: nil, reason: nil, apnsID: nil,
                        timestamp: nil, attempts: 0, transportError: "not sent")
            }
        }
    }
}

extension APNsSender {
    /// One buffer per distinct payload storage: a batch's requests share one array, so they share one buffer, and
    /// no attempt copies the payload again.
    static func payloadBuffers(_ requests: ArraySlice<APNsRequest>) -> [ByteBuffer] {
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

/// A sender configuration that cannot work.
public struct APNsConfigurationError: Error, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
