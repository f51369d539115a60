import EnrichmentCore
import EnrichmentRuntime
import Essentials
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The HTTP/1.1 child channel of the service: Hummingbird's, with connection deadlines, the connection cap,
/// and malformed requests (headers too large, bad syntax) answered in the API's JSON error shape.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let inner: HTTP1Channel
    let registry: ConnectionRegistry

    init(
        responder: @escaping HTTPChannelHandler.Responder, limits: ConnectionLimits, enrich: EnrichAnswerer?,
        logger: Logger
    ) {
        let registry = ConnectionRegistry(limits: limits, logger: logger)
        self.registry = registry
        // After the observer, so that it sees the requests answered on the event loop (their answers are written
        // below it, and `EnrichOnEventLoop` tells the deadlines itself).
        self.inner = HTTP1Channel(
            responder: responder,
            configuration: .init(
                additionalChannelHandlers: [RequestPartObserver()]
                    + (enrich.map { [EnrichOnEventLoop(answerer: $0)] } ?? [])))
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            // First in the pipeline, so it sees raw bytes before the HTTP decoder does.
            try channel.pipeline.syncOperations.addHandler(
                ConnectionDeadlineHandler(registry: registry), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with the service's connection limits, and `POST /v1/enrich` answered on the event loop where it
    /// can be (`EnrichOnEventLoop`) unless `enrich` is nil.
    static func guardedHTTP1(limits: ConnectionLimits, enrich: EnrichAnswerer?, logger: Logger) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            GuardedHTTP1Channel(responder: responder, limits: limits, enrich: enrich, logger: logger)
        }
    }
}

/// Every open connection, so that the cap can be kept by closing the longest-waiting idle one.
final class ConnectionRegistry: Sendable {
    struct Entry {
        var channel: any Channel
        /// When the connection last had no request under way; nil while a request is being read or handled.
        var waitingSince: NIODeadline?
    }

    let limits: ConnectionLimits
    let logger: Logger
    private let entries = Mutex<[ObjectIdentifier: Entry]>([:])

    init(limits: ConnectionLimits, logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    /// Registers a new connection. Returns false when the cap is reached and no waiting connection could make room.
    func admit(_ id: ObjectIdentifier, channel: any Channel) -> Bool {
        let (admitted, victim): (Bool, (any Channel)?) = entries.withLock { entries in
            var victim: (any Channel)?
            if entries.count >= limits.maxConnections {
                let oldest = entries.filter { $0.value.waitingSince != nil }
                    .min { $0.value.waitingSince! < $1.value.waitingSince! }
                guard let oldest else { return (false, nil) }
                victim = oldest.value.channel
                entries.removeValue(forKey: oldest.key)
            }
            entries[id] = Entry(channel: channel, waitingSince: .now())
            return (true, victim)
        }
        if let victim {
            logger.debug(
                "connection cap reached: closing the longest-waiting connection",
                metadata: ["cap": "\(limits.maxConnections)"])
            victim.close(promise: nil)
        }
        return admitted
    }

    /// Marks a connection as waiting (evictable) or busy.
    func setWaiting(_ id: ObjectIdentifier, _ waiting: Bool) {
        entries.withLock { entries in
            guard entries[id] != nil else { return }
            entries[id]!.waitingSince = waiting ? .now() : nil
        }
    }

    func remove(_ id: ObjectIdentifier) {
        _ = entries.withLock { $0.removeValue(forKey: id) }
    }

    /// Connections currently open.
    var count: Int { entries.withLock { $0.count } }
}

/// Sees the raw bytes of one connection (first in its pipeline) and enforces its deadlines.
///
/// States: waiting for a request (idle timeout), reading a request's head (header timeout, from its first byte),
/// reading its body (body timeout, from the end of the head), handling it (no deadline: the handlers have their
/// own). `RequestPartObserver`, after the HTTP decoder, reports the request and response boundaries.
final class ConnectionDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    enum Phase: Equatable { case waiting, readingHead, readingBody, handling }

    let registry: ConnectionRegistry
    private(set) var phase = Phase.waiting
    /// When the current phase began: its deadline is this plus the phase's timeout.
    private var phaseStarted = NIODeadline.now()
    /// The one timer of the connection, and when it fires. It is not moved when a deadline moves later (the common
    /// case: each request of a keep-alive connection pushes the idle deadline on): when it fires early it looks
    /// at the deadline of the phase then and sleeps again until it. Only a deadline earlier than the timer
    /// reschedules it. A request whose head and body arrive in one read arms nothing: the deadlines of its head
    /// and body phases are looked at when the read is done, and by then it is past them.
    private var timer: Scheduled<Void>?
    private var timerAt = NIODeadline.distantFuture
    private var reading = false
    private var context: ChannelHandlerContext?
    private var id: ObjectIdentifier { ObjectIdentifier(self) }

    init(registry: ConnectionRegistry) { self.registry = registry }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        guard registry.admit(id, channel: context.channel) else {
            // Every connection is busy: say so, in the API's shape, and close.
            let body = String(
                decoding: APIError(
                    .serviceUnavailable, reason: .tooManyConnections,
                    message: "the server is at its connection limit; retry shortly"
                ).jsonBytes, as: UTF8.self)
            let response =
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
                + "Content-Length: \(body.utf8.count)\r\nRetry-After: 1\r\nConnection: close\r\n\r\n\(body)"
            let buffer = context.channel.allocator.buffer(string: response)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(buffer))).whenComplete { _ in channel.close(promise: nil)
            }
            registry.logger.warning(
                "connection refused at the connection cap", metadata: ["cap": "\(registry.limits.maxConnections)"])
            phase = .handling
            return
        }
        enter(.waiting)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimer()
        self.context = nil
        registry.remove(id)
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimer()
        registry.remove(id)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if phase == .waiting {
            // Still evictable at the cap: a client that trickles its headers is no better than an idle one.
            phase = .readingHead
            phaseStarted = .now()
        }
        let outer = reading
        reading = true
        context.fireChannelRead(data)
        reading = outer
        if !outer { reconcile() }
    }

    private var bodyDone = false
    private var responseDone = false

    /// The request's head was decoded.
    func headReceived() {
        bodyDone = false
        responseDone = false
        registry.setWaiting(id, false)
        enter(.readingBody)
    }

    /// The request's body ended.
    func bodyReceived() {
        bodyDone = true
        if responseDone {
            becomeWaiting()
        } else {
            enter(.handling)
        }
    }

    /// The response was written in full. An early answer (401, 413) still lets the rest of the body be read,
    /// under the body deadline.
    func responseSent() {
        responseDone = true
        if bodyDone { becomeWaiting() }
    }

    private func becomeWaiting() {
        registry.setWaiting(id, true)
        enter(.waiting)
    }

    private func enter(_ next: Phase) {
        phase = next
        phaseStarted = .now()
        if !reading { reconcile() }
    }

    /// The current phase's deadline and what its passing means, or nil while a request is being handled.
    private var deadline: (at: NIODeadline, reason: String)? {
        let limits = registry.limits
        switch phase {
        case .waiting: return (phaseStarted + Self.amount(limits.idleTimeout), "idle")
        case .readingHead:
            return (phaseStarted + Self.amount(limits.headerTimeout), "request headers not received in time")
        case .readingBody:
            return (phaseStarted + Self.amount(limits.bodyTimeout), "request body not received in time")
        case .handling: return nil
        }
    }

    /// Makes sure the timer fires no later than the current deadline (it may fire earlier, and then looks again).
    private func reconcile() {
        guard let deadline, deadline.at < timerAt else { return }
        schedule(at: deadline.at)
    }

    private func schedule(at when: NIODeadline) {
        timer?.cancel()
        guard let context else { return }
        timerAt = when
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: when) { [weak self] in
            self?.timerFired()
        }
    }

    private func timerFired() {
        timer = nil
        timerAt = .distantFuture
        guard let deadline, let context else { return }
        guard NIODeadline.now() >= deadline.at else {
            schedule(at: deadline.at)
            return
        }
        registry.logger.debug("closing connection", metadata: ["reason": "\(deadline.reason)"])
        context.close(promise: nil)
    }

    private func stopTimer() {
        timer?.cancel()
        timer = nil
        timerAt = .distantFuture
    }

    private static func amount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(
            Int64(clamping: duration.components.seconds) &* 1_000_000_000
                &+ duration.components.attoseconds / 1_000_000_000)
    }
}

/// After the HTTP decoder: reports request and response boundaries to the connection's deadline handler, and
/// answers requests the decoder cannot read (431 for headers over the limit, 400 otherwise) in the JSON error shape.
final class RequestPartObserver: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var deadlines: ConnectionDeadlineHandler?
    private var responding = false

    func handlerAdded(context: ChannelHandlerContext) {
        deadlines = try? context.pipeline.syncOperations.handler(type: ConnectionDeadlineHandler.self)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: deadlines?.headReceived()
        case .body: break
        case .end: deadlines?.bodyReceived()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status.kind != .informational: responding = true
        case .end:
            responding = false
            deadlines?.responseSent()
        default: break
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        // Not passed on: Hummingbird would answer an empty 400. A response already under way is left alone.
        guard !responding else {
            context.close(promise: nil)
            return
        }
        let (status, reason, message): (HTTPResponse.Status, APIReason, String) =
            switch parserError {
            case .headerOverflow:
                (
                    .requestHeaderFieldsTooLarge, .headersTooLarge,
                    "the request line and headers are larger than the server accepts (80 KiB); send less"
                )
            default:
                (
                    .badRequest, .malformedRequest,
                    "the request is not valid HTTP/1.1 (\(parserError)); check the client"
                )
            }
        let body = APIError(status, reason: reason, message: message).jsonBytes
        var head = HTTPResponse(status: status)
        head.headerFields[.contentType] = "application/json; charset=utf-8"
        head.headerFields[.contentLength] = String(body.count)
        head.headerFields[.connection] = "close"
        responding = true
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
