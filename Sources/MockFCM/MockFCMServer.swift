public import Essentials
import FCMCore
import Foundation
public import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// How the mock FCM runs.
public struct MockFCMConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port.
    public var port = 0
    /// Server certificate chain and key (PEM); see `LocalCertificateAuthority` for a throwaway pair.
    public var certificateChainPEM: String
    public var privateKeyPEM: String
    /// The service accounts whose assertions the token endpoint accepts.
    public var accounts: [MockFCMAccount]
    /// `expires_in` of the access tokens issued (Google: 3599).
    public var accessTokenLifetime: Int64 = 3599
    /// SETTINGS_MAX_CONCURRENT_STREAMS sent to each connection (Google's front ends: 100).
    public var maxConcurrentStreams = 100
    public var clock: any WallClock = SystemWallClock()

    public init(certificateChainPEM: String, privateKeyPEM: String, accounts: [MockFCMAccount]) {
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
        self.accounts = accounts
    }
}

/// A local Firebase Cloud Messaging over HTTP/2 + TLS: `POST /token` (the OAuth 2.0 JWT-bearer grant, assertions
/// verified with the configured accounts' keys) and `POST /v1/projects/{project}/messages:send` (the bearer token
/// it issued, the message's shape and limits checked as FCM does, Google's error bodies), scriptable per
/// registration token through `MockFCMState` or `/control/...`.
public struct MockFCMServer: Sendable {
    let configuration: MockFCMConfiguration
    let logic: MockFCMLogic
    let sslContext: NIOSSLContext
    let logger: Logger

    public init(
        _ configuration: MockFCMConfiguration, state: MockFCMState, logger: Logger = Logger(label: "mock-fcm")
    ) throws {
        self.configuration = configuration
        self.logger = logger
        logic = MockFCMLogic(
            accounts: Dictionary(configuration.accounts.map { ($0.clientEmail, $0) }, uniquingKeysWith: { $1 }),
            state: state, clock: configuration.clock, accessTokenLifetime: configuration.accessTokenLifetime)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(configuration.certificateChainPEM.utf8)).map {
                .certificate($0)
            },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(configuration.privateKeyPEM.utf8), format: .pem)))
        tls.applicationProtocols = ["h2"]
        sslContext = try NIOSSLContext(configuration: tls)
    }

    /// Binds, calls `onRunning` with the bound port, and serves until the task is cancelled.
    public func run(onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let logic = self.logic
        let sslContext = self.sslContext
        let logger = self.logger
        let streams = configuration.maxConcurrentStreams
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                logic.state.noteConnection()
                var http2 = NIOHTTP2Handler.ConnectionConfiguration()
                http2.initialSettings = [
                    HTTP2Setting(parameter: .maxConcurrentStreams, value: streams),
                    HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
                ]
                let settings = http2
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                }.flatMap {
                    channel.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: settings,
                        streamConfiguration: NIOHTTP2Handler.StreamConfiguration(),
                        inboundStreamInitializer: { stream in
                            stream.eventLoop.makeCompletedFuture {
                                try stream.pipeline.syncOperations.addHandler(
                                    FCMStreamHandler(logic: logic, logger: logger))
                            }
                        }
                    ).map { _ in }
                }
            }
            .bind(host: configuration.host, port: configuration.port).get()
        let port = channel.localAddress?.port ?? configuration.port
        logger.info("mock FCM listening", metadata: ["address": "https://\(configuration.host):\(port)"])
        await onRunning(port)
        try await withTaskCancellationHandler {
            try await channel.closeFuture.get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}

/// One HTTP/2 stream: collects the request (bodies past 1 MiB are refused), asks the logic, writes the answer.
final class FCMStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let logic: MockFCMLogic
    private let logger: Logger
    private var headers: HPACKHeaders?
    private var body: [UInt8] = []
    private var tooLarge = false
    private var answered = false
    static let bodyLimit = 1 << 20

    init(logic: MockFCMLogic, logger: Logger) {
        self.logic = logic
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if headers == nil { headers = frame.headers }
            if frame.endStream { answer(context: context) }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data {
                if tooLarge || body.count + buffer.readableBytes > Self.bodyLimit {
                    tooLarge = true
                } else {
                    body.append(contentsOf: buffer.readableBytesView)
                }
            }
            if frame.endStream { answer(context: context) }
        default:
            break
        }
    }

    private func answer(context: ChannelHandlerContext) {
        guard !answered, let headers else { return }
        answered = true
        var fields: [String: String] = [:]
        for (name, value, _) in headers where !name.hasPrefix(":") { fields[name.lowercased()] = value }
        let reply: MockFCMReply
        if tooLarge {
            reply = .googleError(413, "INVALID_ARGUMENT", "Request payload size exceeds the limit: 1048576 bytes.")
        } else {
            reply = logic.respond(
                method: headers.first(name: ":method") ?? "", path: headers.first(name: ":path") ?? "",
                authority: headers.first(name: ":authority") ?? fields["host"] ?? "", headers: fields, body: body)
        }
        if reply.delayMilliseconds > 0 {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(Int64(reply.delayMilliseconds))) {
                let (handler, context) = loopBound.value
                handler.write(reply, context: context)
            }
        } else {
            write(reply, context: context)
        }
    }

    private func write(_ reply: MockFCMReply, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        var head = HPACKHeaders([(":status", String(reply.status))])
        for (name, value) in reply.headers { head.add(name: name, value: value) }
        head.add(name: "content-length", value: String(reply.body.count))
        context.write(wrapOutboundOut(.headers(.init(headers: head, endStream: false))), promise: nil)
        context.writeAndFlush(
            wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(bytes: reply.body)), endStream: true))),
            promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("stream error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
