import EnrichmentCore
import EnrichmentRuntime
import Essentials
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// `POST /v1/enrich` answered on the connection's event loop, in the channel pipeline: no task, no async stream,
/// no middleware chain. It answers only what it can answer exactly as the route would, and passes every other
/// request on, unchanged, to Hummingbird's responder (the routes and their middlewares):
///
/// - the request: `POST /v1/enrich` (no query, no `Connection`, `Expect` or `Transfer-Encoding` header, a
///   `Content-Length` within the body limit, one JSON Content-Type or none), with no other request of the connection
///   still being answered (a pipelined request is answered in order by the responder), none passed on with
///   `Connection`, and the socket writable (else the responder's backpressure holds the reads);
/// - the service: the places index in, no tracing and no request log (a span or a log line per request is the
///   middlewares'), SQLite (with PostgreSQL the last fix is read from the shared database each time);
/// - the key: one the route accepts (`APIKeyRing.scope(of:)`, the route's permission);
/// - the body: a valid enrichment request (`EnrichRequest`), and the enrichment finished from memory
///   (`Enricher.enrichNow`: the device's last fix and context cached, the places searched in the index).
///
/// Anything else (an error to answer, a fix to read from the store) goes to the responder, which answers it as it
/// answers every request: the enrichment changes nothing, so trying it first and passing the request on loses
/// nothing. The answer is the route's: the same body, status and headers (`Content-Type`, `Content-Length`, `Date`,
/// `Server`), and the same metrics (`http_requests_total`, the enrichment's duration, places time and outcome).
/// docs/ARCHITECTURE.md, "Enrichment on the event loop"; `EnrichOnEventLoopTests` compares both ways.
final class EnrichOnEventLoop: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private enum State {
        /// Between requests.
        case idle
        /// A candidate's head, its body so far in `body`: answered here at its end, or passed on.
        case collecting(HTTPRequest)
        /// A request passed on to the responder: its remaining parts follow it.
        case passing
    }

    let answerer: EnrichAnswerer
    private var state = State.idle
    /// The body of the candidate being collected (held apart from `state`, so that appending never copies it).
    private var body: ByteBuffer?
    /// Requests passed on whose response has not ended: while there is one, every request is passed on.
    private var unanswered = 0
    /// A request passed on with `Connection: close`: the responder closes after it, nothing more is answered here.
    private var closing = false
    /// A graceful shutdown's notice that came while a request was being collected here, passed on after it.
    private var heldQuiesce: Any?
    private var needsFlush = false
    private var dates = HTTPDateCache()
    /// The HTTP types codec's context: an answer is written from it, as NIO's HTTP/1 parts.
    private var codec: ChannelHandlerContext?
    /// Told when an answer written here is sent (the observer below is told by the responder's `.end`).
    private var deadlines: ConnectionDeadlineHandler?

    init(answerer: EnrichAnswerer) { self.answerer = answerer }

    func handlerAdded(context: ChannelHandlerContext) {
        // Without either (another pipeline than the service's), every request is passed on.
        codec = try? context.pipeline.syncOperations.context(handlerType: HTTP1ToHTTPServerCodec.self)
        deadlines = try? context.pipeline.syncOperations.handler(type: ConnectionDeadlineHandler.self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        codec = nil
        deadlines = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch (state, part) {
        case (.idle, .head(let head)):
            // Answers written here wait for no reader: while the socket is full, requests go the responder's way,
            // which stops reading until it drains.
            if unanswered == 0, !closing, context.channel.isWritable, answerer.mayAnswer(head) {
                state = .collecting(head)
                body = nil
            } else {
                if head.headerFields[.connection] != nil { closing = true }
                passOn(context, data)
            }
        case (.collecting(let head), .body(let more)):
            guard (body?.readableBytes ?? 0) + more.readableBytes <= answerer.maxBodyBytes else {
                // More than declared (the decoder does not let it happen): the responder says so.
                passOnCollected(context, head: head)
                context.fireChannelRead(data)
                releaseHeldNotice(context)
                return
            }
            if body == nil {
                body = more
            } else {
                body!.writeImmutableBuffer(more)
            }
        case (.collecting(let head), .end(let trailers)):
            if trailers == nil, let codec,
                let (answerHead, answer) = answerer.answer(
                    head, body: body ?? ByteBuffer(), date: dates.now())
            {
                state = .idle
                body = nil
                // Written as NIO's HTTP/1 parts from the codec's context (`EnrichAnswerWire`): the encoder below
                // frames it as every response of the connection, and nothing above the codec handles it.
                codec.write(NIOAny(HTTPServerResponsePart.head(answerHead)), promise: nil)
                codec.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(answer))), promise: nil)
                codec.write(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
                deadlines?.responseSent()
                needsFlush = true
            } else {
                passOnCollected(context, head: head)
                context.fireChannelRead(data)
                state = .idle
            }
            releaseHeldNotice(context)
        case (.passing, .end):
            state = .idle
            context.fireChannelRead(data)
        default:
            // The rest of a request passed on (or a part out of order: the responder judges it).
            context.fireChannelRead(data)
        }
    }

    /// Passes a request's head on to the responder; its other parts follow it.
    private func passOn(_ context: ChannelHandlerContext, _ head: NIOAny) {
        unanswered += 1
        state = .passing
        context.fireChannelRead(head)
    }

    /// Passes the collected candidate on, as it arrived.
    private func passOnCollected(_ context: ChannelHandlerContext, head: HTTPRequest) {
        passOn(context, wrapInboundOut(.head(head)))
        if let collected = body { context.fireChannelRead(wrapInboundOut(.body(collected))) }
        body = nil
    }

    /// The graceful shutdown's notice held while a request was collected, passed on now that it is answered or
    /// passed on (an answer written here is flushed first).
    private func releaseHeldNotice(_ context: ChannelHandlerContext) {
        guard let notice = heldQuiesce else { return }
        heldQuiesce = nil
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireUserInboundEventTriggered(notice)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { unanswered = max(0, unanswered - 1) }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, case .collecting = state {
            // The connection handler closes an idle connection at once: this one is not idle.
            heldQuiesce = event
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// What `EnrichOnEventLoop` needs of the service, shared by every connection: a class holding only what it reads,
/// so that a request copies none of the service's state.
final class EnrichAnswerer: Sendable {
    let keys: APIKeyRing
    let metrics: ServiceMetrics
    let placesLoading: PlacesLoading
    let enricher: Enricher
    let appEnrichers: [String: Enricher]
    let clock: any WallClock
    let maxBodyBytes: Int
    let serverName: String?
    /// The answer's head as the HTTP/1 encoder writes it.
    let wire: EnrichAnswerWire
    /// False when the service's set-up rules it out (see `EnrichOnEventLoop`): every request is passed on.
    let enabled: Bool

    static let path = "/v1/enrich"

    init(state: ServiceState, serverName: String?, enabled: Bool = true) {
        keys = state.keys
        metrics = state.metrics
        placesLoading = state.placesLoading
        enricher = state.enricher
        appEnrichers = state.appEnrichers
        clock = state.clock
        maxBodyBytes = state.maxBodyBytes
        self.serverName = serverName
        wire = EnrichAnswerWire(serverName: serverName)
        self.enabled =
            enabled && state.enricher.spans.tracer == nil && state.configuration.logLevel > .debug
            && state.configuration.databaseURL == nil
    }

    /// Whether a request's head makes it a candidate (the body is judged at its end).
    func mayAnswer(_ head: HTTPRequest) -> Bool {
        guard enabled, head.method == .post, head.path == Self.path else { return false }
        var length: Int?
        var typed = false
        // One pass over the fields: a Content-Length within the limit, a JSON Content-Type or none, no field that
        // changes how the connection goes on.
        for field in head.headerFields {
            switch field.name {
            case .contentLength:
                guard length == nil, let value = Int(field.value), value > 0, value <= maxBodyBytes else {
                    return false
                }
                length = value
            case .contentType:
                // Twice is read by the router as one list (`a, b`), which is not JSON: it answers that.
                guard !typed, JSONIO.isJSONMediaType(field.value) else { return false }
                typed = true
            case .connection, .expect, .transferEncoding:
                return false
            default:
                continue
            }
        }
        return length != nil && placesLoading.isLoaded
    }

    /// The route's answer to a candidate (NIO's HTTP/1 head and the body), or nil when the responder is to answer
    /// it.
    func answer(_ head: HTTPRequest, body: ByteBuffer, date: String) -> (HTTPResponseHead, ByteBuffer)? {
        guard let scope = keys.scope(of: head.headerFields), scope.allows(EnrichRoutes.permission),
            let document = body.withUnsafeReadableBytes({ try? JSONParser.parse($0) })
        else { return nil }
        var started = ContinuousClock.now
        let result: EnrichmentResult? = AppScope.$current.withValue(scope) {
            guard let input = try? EnrichRequest(document) else { return nil }
            // Timed from here, as the route times it.
            started = ContinuousClock.now
            let fix = input.givenFix(clock: clock)
            let policy = input.policy(enricher.settings.staleness)
            return try? AppNamespace.pick(input.deviceId, base: enricher, byApp: appEnrichers).enrichNow(
                deviceId: input.deviceId, payload: input.payload, at: input.at, mode: input.mode, staleness: policy,
                fix: fix)
        }
        guard let result else { return nil }
        metrics.enrichment(result, started: started)
        metrics.request(method: "POST", route: Self.path, status: 200)
        metrics.answeredOnEventLoop()
        let json = result.encodedJSON()
        return (wire.head(length: json.count, date: date), ByteBuffer(bytes: json))
    }
}
