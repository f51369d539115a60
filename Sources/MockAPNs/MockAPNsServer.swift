import APNsCore
public import Essentials
import Foundation
public import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// How the mock APNs server runs.
public struct MockAPNsConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port.
    public var port = 2197
    /// Server certificate chain and key (PEM). See `LocalCertificateAuthority` for a throwaway pair.
    public var certificateChainPEM: String
    public var privateKeyPEM: String
    /// Public key (PEM) that provider tokens must verify with. Nil: a bearer token must be present but is not
    /// verified (a warning is logged at start).
    public var tokenPublicKeyPEM: String?
    /// When set, `kid` must equal it (else 403 UnrelatedKeyIdInToken).
    public var expectedKeyID: String?
    /// When set, `iss` must equal it.
    public var expectedTeamID: String?
    /// Several teams' keys, each team with its apps: a provider token is verified with the key its `kid` names,
    /// its `iss` must be that key's team, and it may push only to the team's bundle ids (else 400
    /// TopicDisallowed; channel management and broadcasts: 403 TopicMismatch). Used besides `tokenPublicKeyPEM`.
    public var teams: [MockTeam] = []
    /// Bundle ids whose Broadcast capability is off: their channel requests and broadcasts get 400
    /// FeatureNotEnabled.
    public var broadcastDisabledBundles: Set<String> = []
    /// Channels an app may have (Apple: 10,000 per app and environment; then 400 CannotCreateChannelConfig).
    public var channelLimitPerApp = 10_000
    /// When set, clients must present a certificate signed by this CA (certificate auth); tokens are then optional.
    public var clientCAPEM: String?
    public var clock: any WallClock = SystemWallClock()

    public init(certificateChainPEM: String, privateKeyPEM: String) {
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
    }
}

/// One Apple developer team as the mock knows it: its token keys and its apps.
public struct MockTeam: Sendable, Equatable {
    public var teamID: String
    /// Key id -> public key (PEM) of the team's `.p8` keys.
    public var keys: [String: String]
    /// The team's apps' bundle ids; a topic is the bundle id, possibly with a push type's suffix. Empty: any.
    public var bundleIDs: Set<String>

    public init(teamID: String, keys: [String: String], bundleIDs: Set<String> = []) {
        self.teamID = teamID
        self.keys = keys
        self.bundleIDs = bundleIDs
    }
}

/// A local APNs-compatible server over HTTP/2 + TLS that validates like Apple and answers with Apple's statuses.
///
/// Built directly on swift-nio-http2 so the wire looks like Apple's: TLS with ALPN `h2` (a client that sends no
/// ALPN is spoken to in HTTP/2 too), a 200 is a HEADERS frame that ends the stream, errors are HEADERS + one
/// JSON DATA frame. Push: `POST /3/device/<token>`. Control (not part of APNs): `GET /control/received`,
/// `DELETE /control/received`, `POST /control/scripts` (`{"token", "status", "reason"?, "times"?, "delay_ms"?,
/// "timestamp"?}`), `DELETE /control/scripts`.
public struct MockAPNsServer: Sendable {
    let configuration: MockAPNsConfiguration
    let logic: MockAPNsLogic
    let sslContext: NIOSSLContext
    let logger: Logger

    /// Prepares the server (reads certificates and keys; nothing is bound yet).
    public init(
        _ configuration: MockAPNsConfiguration, state: MockAPNsState, logger: Logger = Logger(label: "mock-apns")
    ) throws {
        self.configuration = configuration
        self.logger = logger
        logic = try MockAPNsLogic(configuration: configuration, state: state)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(configuration.certificateChainPEM.utf8)).map {
                .certificate($0)
            },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(configuration.privateKeyPEM.utf8), format: .pem)))
        tls.applicationProtocols = ["h2"]
        if let clientCA = configuration.clientCAPEM {
            tls.certificateVerification = .noHostnameVerification
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(clientCA.utf8)))
        }
        sslContext = try NIOSSLContext(configuration: tls)
        if configuration.tokenPublicKeyPEM == nil, configuration.clientCAPEM == nil {
            logger.warning(
                "no token public key configured: provider tokens are required but their signatures are not checked")
        }
    }

    /// Binds, calls `onRunning` with the bound port, and serves until the task is cancelled.
    public func run(onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let logic = self.logic
        let sslContext = self.sslContext
        let logger = self.logger
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let state = logic.state
                let behaviour = state.behaviour
                state.noteConnection()
                let connection = MockConnection(channel: channel, behaviour: behaviour, state: state)
                var http2 = NIOHTTP2Handler.ConnectionConfiguration()
                http2.initialSettings = [
                    HTTP2Setting(parameter: .maxConcurrentStreams, value: behaviour.maxConcurrentStreams),
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
                                    APNsStreamHandler(logic: logic, connection: connection, logger: logger))
                            }
                        }
                    ).flatMapThrowing { _ in
                        try channel.pipeline.syncOperations.addHandler(CloseOnConnectionError(logger: logger))
                    }
                }
            }
            .bind(host: configuration.host, port: configuration.port).get()
        let port = channel.localAddress?.port ?? configuration.port
        logger.info("mock APNs listening", metadata: ["address": "https://\(configuration.host):\(port)"])
        await onRunning(port)
        try await withTaskCancellationHandler {
            try await channel.closeFuture.get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}

/// One HTTP/2 stream: collects the request, asks the logic, writes the answer as Apple does.
final class APNsStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let logic: MockAPNsLogic
    private let connection: MockConnection
    private let logger: Logger
    private var admitted = false
    private var headers: HPACKHeaders?
    private var body: [UInt8] = []
    private var tooLarge = false
    private var answered = false
    private var written = false
    /// Bytes kept of a body; past this (the voip limit) the push is 413 whatever its headers say.
    private static let bodyLimit = PushType.allCases.map(\.maximumPayloadSize).max()!
    /// The control API takes larger bodies (scripts for many tokens).
    private var limit: Int {
        headers?.first(name: ":path")?.hasPrefix("/control/") == true ? MockAPNsLogic.controlBodyLimit : Self.bodyLimit
    }

    init(logic: MockAPNsLogic, connection: MockConnection, logger: Logger) {
        self.logic = logic
        self.connection = connection
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if headers == nil { headers = frame.headers }
            if frame.endStream { answer(context: context) }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data {
                if tooLarge || body.count + buffer.readableBytes > limit {
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
        for (name, value, _) in headers where !name.hasPrefix(":") || name == ":method" || name == ":path" {
            fields[name.lowercased()] = value
        }
        let method = headers.first(name: ":method") ?? ""
        let path = headers.first(name: ":path") ?? ""
        if !path.hasPrefix("/control/") {
            let streamID = (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)) ?? 0
            switch connection.admit(streamID: streamID, stream: context.channel) {
            case .process: admitted = true
            case .hold, .drop: return
            }
        }
        let reply = logic.respond(
            method: method, path: path, headers: fields, body: body, bodyTooLarge: tooLarge,
            certificateTopic: path.hasPrefix("/control/") ? nil : connection.certificateTopic,
            connection: connection.team
        )
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

    private func write(_ reply: MockReply, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        written = true
        defer { if admitted { connection.didAnswer() } }
        var head = HPACKHeaders([(":status", String(reply.status))])
        for (name, value) in reply.headers { head.add(name: name, value: value) }
        if let body = reply.body {
            head.add(name: "content-length", value: String(body.count))
            context.write(wrapOutboundOut(.headers(.init(headers: head, endStream: false))), promise: nil)
            context.writeAndFlush(
                wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true))), promise: nil
            )
        } else {
            context.writeAndFlush(wrapOutboundOut(.headers(.init(headers: head, endStream: true))), promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The stream closed before a (delayed) answer went out: the client reset it.
        if answered, !written { logic.state.noteAbandonedStream() }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("stream error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}

/// Closes the connection when HTTP/2 reports a connection error. swift-nio-http2 has then already sent GOAWAY
/// but leaves the TCP connection open; Apple's servers close it, and so does the mock.
final class CloseOnConnectionError: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any

    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error; closing after GOAWAY", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
