import APNsCore
import Essentials
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// One HTTP/2 + TLS connection to an APNs host, on one event loop; reconnects when it has died.
///
/// Requests are written from the event loop; when a response arrives NIO is in its read loop, so the next request's
/// frames are flushed together with others at the end of that read (one TLS record for many pushes).
final class APNsHTTP2Connection: @unchecked Sendable {
    // Every mutable member is touched only on `eventLoop`.
    let eventLoop: any EventLoop
    private let host: String
    private let port: Int
    private let sslContext: NIOSSLContext
    private let serverHostname: String?
    private let connectTimeout: TimeAmount
    private var live: (any Channel)?
    private var connecting: EventLoopFuture<any Channel>?

    init(eventLoop: any EventLoop, host: String, port: Int, sslContext: NIOSSLContext, connectTimeout: TimeAmount) {
        self.eventLoop = eventLoop
        self.host = host
        self.port = port
        self.sslContext = sslContext
        // SNI takes host names only, not IP addresses.
        self.serverHostname = host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" } ? nil : host
        self.connectTimeout = connectTimeout
    }

    /// The live connection, connecting (again) when there is none.
    private func connection() -> EventLoopFuture<any Channel> {
        eventLoop.preconditionInEventLoop()
        if let live, live.isActive { return eventLoop.makeSucceededFuture(live) }
        live = nil
        if let connecting { return connecting }
        let sslContext = self.sslContext
        let serverHostname = self.serverHostname
        let future = ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        try NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname))
                }
            }
            .connect(host: host, port: port)
            .flatMap { channel in
                channel.configureHTTP2Pipeline(mode: .client, inboundStreamInitializer: nil).map { _ in channel }
            }
        connecting = future
        future.whenComplete { result in
            self.connecting = nil
            if case .success(let pair) = result { self.live = pair }
        }
        return future
    }

    /// Sends one request with `payload` (the request's payload as a buffer, shared across attempts and tokens);
    /// the future fails on transport errors and on `timeout`, and a request that timed out resets its stream.
    func send(
        _ request: APNsRequest, payload: ByteBuffer, authorization: String?, baseHost: String,
        timeout: TimeAmount
    ) -> EventLoopFuture<APNsResponse> {
        eventLoop.preconditionInEventLoop()
        let promise = eventLoop.makePromise(of: APNsResponse.self)
        connection().whenComplete { result in
            switch result {
            case .failure(let error):
                promise.fail(error)
            case .success(let channel):
                let multiplexer: HTTP2StreamMultiplexer
                do {
                    multiplexer = try channel.pipeline.syncOperations.handler(type: HTTP2StreamMultiplexer.self)
                } catch {
                    promise.fail(error)
                    return
                }
                // Set on the event loop when the stream exists; a timeout closes it, which sends RST_STREAM(CANCEL).
                let streamBox = StreamBox()
                multiplexer.createStreamChannel(promise: nil) { stream in
                    streamBox.stream = stream
                    return stream.eventLoop.makeCompletedFuture {
                        try stream.pipeline.syncOperations.addHandler(APNsResponseHandler(promise: promise))
                        var headers = HPACKHeaders([
                            (":method", "POST"), (":scheme", "https"), (":path", request.path),
                            (":authority", baseHost),
                        ])
                        if let authorization { headers.add(name: "authorization", value: authorization) }
                        if let topic = request.topic { headers.add(name: "apns-topic", value: topic) }
                        if let pushType = request.pushType { headers.add(name: "apns-push-type", value: pushType) }
                        if let priority = request.priority {
                            headers.add(name: "apns-priority", value: String(priority))
                        }
                        if let expiration = request.expiration {
                            headers.add(name: "apns-expiration", value: expiration)
                        }
                        if let collapseID = request.collapseID {
                            headers.add(name: "apns-collapse-id", value: collapseID)
                        }
                        if let apnsID = request.apnsID { headers.add(name: "apns-id", value: apnsID) }
                        headers.add(name: "content-type", value: "application/json")
                        headers.add(name: "content-length", value: String(payload.readableBytes))
                        stream.write(HTTP2Frame.FramePayload.headers(.init(headers: headers)), promise: nil)
                        stream.writeAndFlush(
                            HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(payload), endStream: true))
                        )
                        .whenFailure { promise.fail($0) }
                    }
                }
                let timer = channel.eventLoop.scheduleTask(in: timeout) {
                    promise.fail(APNsTransportError.timeout)
                    streamBox.stream?.close(promise: nil)
                }
                promise.futureResult.whenComplete { _ in timer.cancel() }
            }
        }
        return promise.futureResult
    }

    func close() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            guard let channel = self.live else { return self.eventLoop.makeSucceededVoidFuture() }
            self.live = nil
            return channel.close().recover { _ in }
        }
    }
}

/// The stream of one request, once created; touched only on the connection's event loop.
private final class StreamBox: @unchecked Sendable {
    var stream: (any Channel)?
}

/// Transport failures of the HTTP/2 client.
enum APNsTransportError: Error, CustomStringConvertible {
    case timeout
    case streamClosed

    var description: String {
        switch self {
        case .timeout: "no answer in time"
        case .streamClosed: "the connection closed before the answer"
        }
    }
}

/// Reads one response (HEADERS, then an optional JSON DATA frame) from a stream.
final class APNsResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload

    private let promise: EventLoopPromise<APNsResponse>
    private var status: Int?
    private var apnsID: String?
    private var body: [UInt8] = []

    init(promise: EventLoopPromise<APNsResponse>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if status == nil {
                status = frame.headers.first(name: ":status").flatMap(Int.init)
                apnsID = frame.headers.first(name: "apns-id")
            }
            if frame.endStream { finish() }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data, body.count < 64 * 1024 {
                body.append(contentsOf: buffer.readableBytesView)
            }
            if frame.endStream { finish() }
        default:
            break
        }
    }

    private func finish() {
        guard let status else {
            promise.fail(APNsTransportError.streamClosed)
            return
        }
        var reason: APNsReason?
        var timestamp: Int64?
        if status != 200, let json = try? JSONParser.parse(body) {
            reason = json["reason"]?.stringValue.map(APNsReason.init(rawValue:))
            if case .int(let value)? = json["timestamp"] { timestamp = value }
        }
        promise.succeed(APNsResponse(status: status, apnsID: apnsID, reason: reason, timestamp: timestamp))
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(APNsTransportError.streamClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
}
