import APNsCore
import Essentials
import NIOCore
import NIOHPACK
import NIOHTTP2

/// One HTTP/2 connection to APNs, spoken frame by frame: it owns its streams, reads answers, obeys the server's
/// SETTINGS, GOAWAY and resets, watches for a dead peer with PING, and reports every outcome to its pool.
///
/// No child channel per stream: a push is two frames written here and one entry in `streams`, and the pool flushes
/// once per round of sends, so the frames of many pushes leave in one TLS record and one `write`.
/// Everything runs on the pool's event loop.
final class APNsConnection: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    enum State {
        /// TCP/TLS/HTTP/2 preface under way; no SETTINGS from the server yet.
        case connecting
        /// Takes new streams.
        case ready
        /// Takes no new streams (GOAWAY received, stream ids used up, or the peer stopped answering PINGs); closes
        /// when its last stream ends.
        case draining
        case closed
    }

    /// One push on the wire.
    struct InFlight {
        var job: PushJob
        var status: Int?
        var apnsID: String?
        var body: [UInt8] = []
    }

    let number: Int
    private(set) var state = State.connecting
    private let pool: APNsConnectionPool
    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: InFlight] = [:]
    /// Streams in the order they were opened, with their deadlines: timeouts are found at the head.
    private var deadlines = CircularBuffer<(HTTP2StreamID, NIODeadline)>(initialCapacity: 64)
    private var nextStreamID = HTTP2StreamID(1)
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (none sent: unlimited, held to `pool.streamCap`).
    private var remoteStreamLimit = Int.max
    private var goAwayLastStreamID: HTTP2StreamID?
    private var lastInbound = NIODeadline.now()
    private var pingSentAt: NIODeadline?
    private var pingCounter: UInt64 = 0
    private var ticker: RepeatedTask?
    private var needsFlush = false
    /// Pushes written since the last flush.
    private var unflushedPushes = 0
    /// Flush after this many pushes even inside one round: the server starts on the first ones while the rest are
    /// encoded (a whole round in one write leaves each side idle while the other works).
    static let pushesPerFlush = 10
    /// DATA bytes received since the last connection-level WINDOW_UPDATE. Without a stream multiplexer nobody else
    /// returns them, and a server that answers with bodies (errors, or nghttpd's echo) would stall once 64 KiB are in.
    private var unreturnedWindow = 0
    /// Why the connection failed, for the pool's message (the first error seen wins).
    private(set) var failure: (any Error)?

    init(number: Int, pool: APNsConnectionPool) {
        self.number = number
        self.pool = pool
    }

    /// Streams this connection can open now.
    var capacity: Int {
        guard state == .ready else { return 0 }
        return max(0, min(remoteStreamLimit, pool.streamCap) - streams.count)
    }

    var inFlightCount: Int { streams.count }

    // MARK: Sending

    /// Writes one push (HEADERS + DATA) on a new stream; the pool flushes after its round of sends.
    func send(_ job: PushJob, headers: HPACKHeaders, payload: ByteBuffer, timeout: TimeAmount) {
        guard let context, state == .ready else {
            pool.refused([job], by: self)
            return
        }
        let streamID = nextStreamID
        nextStreamID = nextStreamID.advanced(by: 2)
        streams[streamID] = InFlight(job: job)
        deadlines.append((streamID, .now() + timeout))
        // No write promise (one allocation per push saved): a stream the state machine refuses still ends, through
        // StreamClosedEvent or at worst the request timeout.
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(payload), endStream: true)))),
            promise: nil)
        needsFlush = true
        unflushedPushes += 1
        if unflushedPushes >= Self.pushesPerFlush { flushIfNeeded() }
        // Client stream ids are odd and end at 2^31 - 1: well before that, move to a new connection.
        if Int(nextStreamID) > Int(Int32.max) - 1024 { beginDraining() }
    }

    /// Sends what `send` wrote; one flush for many pushes.
    func flushIfNeeded() {
        guard needsFlush, let context else { return }
        needsFlush = false
        unflushedPushes = 0
        context.flush()
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        lastInbound = .now()
        ticker = context.eventLoop.scheduleRepeatedTask(initialDelay: pool.tick, delay: pool.tick) { [weak self] _ in
            self?.onTick()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        ticker?.cancel()
        ticker = nil
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        lastInbound = .now()
        switch frame.payload {
        case .headers(let headers):
            guard var flight = streams[frame.streamID] else { return }
            if flight.status == nil {
                flight.status = headers.headers.first(name: ":status").flatMap { Int($0) }
                flight.apnsID = headers.headers.first(name: "apns-id")
            }
            if headers.endStream {
                streams.removeValue(forKey: frame.streamID)
                answer(flight)
            } else {
                streams[frame.streamID] = flight
            }
        case .data(let data):
            unreturnedWindow += data.data.readableBytes + (data.paddingBytes ?? 0)
            if unreturnedWindow >= 32_768 {
                context.write(
                    wrapOutboundOut(
                        HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unreturnedWindow))
                    ),
                    promise: nil)
                unreturnedWindow = 0
                needsFlush = true
            }
            guard var flight = streams[frame.streamID] else { return }
            if case .byteBuffer(let buffer) = data.data, flight.body.count < 64 * 1024 {
                flight.body.append(contentsOf: buffer.readableBytesView)
            }
            if data.endStream {
                streams.removeValue(forKey: frame.streamID)
                answer(flight)
            } else {
                streams[frame.streamID] = flight
            }
        case .rstStream(let code):
            guard let flight = streams.removeValue(forKey: frame.streamID) else { return }
            if code == .refusedStream {
                // RFC 9113 8.7: a refused stream was not processed; it is safe to send again at once.
                pool.refused([flight.job], by: self)
            } else if let status = flight.status, status != 200 || code == .noError {
                // Answered, then reset (a server may answer before reading the whole body).
                answer(flight)
            } else {
                pool.failed(flight.job, by: self, error: .reset(code))
            }
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                remoteStreamLimit = setting.value
            }
            if state == .connecting {
                state = .ready
                pool.connectionReady(self)
            } else {
                pool.capacityChanged(self)
            }
        case .ping(_, ack: true):
            pingSentAt = nil
        case .goAway(let lastStreamID, let code, _):
            goAway(lastStreamID: lastStreamID, code: code)
        default:
            break
        }
        if state == .draining, streams.isEmpty { context.close(promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Answers read in this loop made room: the pool sends more, and everything goes out in one flush.
        pool.pump()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent, let flight = streams.removeValue(forKey: closed.streamID) {
            // Closed without a complete answer and without a frame telling why (e.g. swift-nio-http2 dropped it).
            if let goAwayLastStreamID, closed.streamID > goAwayLastStreamID {
                pool.refused([flight.job], by: self)
            } else if flight.status != nil {
                answer(flight)
            } else {
                pool.failed(flight.job, by: self, error: .reset(closed.reason ?? .noError))
            }
            if state == .draining, streams.isEmpty { context.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            // One stream broke (e.g. a malformed answer); the connection lives on.
            if let flight = streams.removeValue(forKey: streamError.streamID) {
                pool.failed(flight.job, by: self, error: .protocolViolation("\(streamError.baseError)"))
            }
            return
        }
        failure = failure ?? error
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle()
        context.fireChannelInactive()
    }

    /// Hands the streams still in flight to the pool as lost, once; the connection takes nothing more.
    private func settle() {
        guard state != .closed else { return }
        let wasReady = state != .connecting
        state = .closed
        ticker?.cancel()
        ticker = nil
        let lost = streams.values.map(\.job)
        streams.removeAll()
        deadlines.removeAll()
        pool.connectionClosed(self, wasReady: wasReady, lost: lost)
    }

    /// Gives up on a peer that stopped answering: its pushes go elsewhere now, not when TLS finishes closing (which
    /// waits for a peer that will not answer).
    private func abandon(_ error: APNsTransportError) {
        failure = failure ?? error
        settle()
        context?.close(promise: nil)
    }

    // MARK: Rules

    private func answer(_ flight: InFlight) {
        guard let status = flight.status else {
            pool.failed(flight.job, by: self, error: .closedBeforeAnswer)
            return
        }
        var reason: APNsReason?
        var timestamp: Int64?
        if status != 200, let json = try? JSONParser.parse(flight.body) {
            reason = json["reason"]?.stringValue.map(APNsReason.init(rawValue:))
            if case .int(let value)? = json["timestamp"] { timestamp = value }
        }
        pool.answered(
            flight.job, by: self,
            response: APNsResponse(status: status, apnsID: flight.apnsID, reason: reason, timestamp: timestamp))
    }

    /// RFC 9113 6.8: streams above `lastStreamID` were not processed and go again at once, elsewhere; the rest are
    /// answered here as usual, then the connection closes.
    private func goAway(lastStreamID: HTTP2StreamID, code: HTTP2ErrorCode) {
        let last = min(lastStreamID, goAwayLastStreamID ?? lastStreamID)
        goAwayLastStreamID = last
        let unprocessed = streams.keys.filter { $0 > last }
        let jobs = unprocessed.compactMap { streams.removeValue(forKey: $0)?.job }
        if code != .noError { failure = failure ?? APNsTransportError.goAway(code) }
        beginDraining()
        if !jobs.isEmpty { pool.refused(jobs, by: self) }
    }

    /// Takes no new streams from now on; the pool opens a replacement before this one is gone.
    func beginDraining() {
        guard state == .ready || state == .connecting else { return }
        state = .draining
        pool.connectionDraining(self)
        if streams.isEmpty { context?.close(promise: nil) }
    }

    /// Closes now; streams in flight are reported lost.
    func close() -> EventLoopFuture<Void> {
        guard let context else { return pool.loop.makeSucceededVoidFuture() }
        return context.close().recover { _ in }
    }

    private func onTick() {
        guard let context, state != .closed else { return }
        let now = NIODeadline.now()
        var expired: [InFlight] = []
        while let (streamID, deadline) = deadlines.first {
            guard let flight = streams[streamID] else {
                deadlines.removeFirst()
                continue
            }
            guard deadline <= now else { break }
            deadlines.removeFirst()
            streams.removeValue(forKey: streamID)
            expired.append(flight)
            // Tell the server we gave up (RST_STREAM(CANCEL)), so it can drop the work.
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
            needsFlush = true
        }
        for flight in expired { pool.failed(flight.job, by: self, error: .timeout) }
        if let pingSentAt {
            if now - pingSentAt > pool.pingTimeout {
                abandon(.pingUnanswered)
                return
            }
        } else if now - lastInbound >= pool.pingInterval {
            pingCounter &+= 1
            pingSentAt = now
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(
                        streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: pingCounter), ack: false))
                ), promise: nil)
            needsFlush = true
        }
        if state == .draining, streams.isEmpty {
            context.close(promise: nil)
            return
        }
        flushIfNeeded()
        if !expired.isEmpty { pool.pump() }
    }
}

/// Transport failures of the HTTP/2 client, as users read them.
enum APNsTransportError: Error, CustomStringConvertible, Equatable {
    case timeout
    case closedBeforeAnswer
    case reset(HTTP2ErrorCode)
    case goAway(HTTP2ErrorCode)
    case pingUnanswered
    case protocolViolation(String)
    case refusedTooOften

    var description: String {
        switch self {
        case .timeout: "no answer in time (the stream was reset)"
        case .closedBeforeAnswer: "the connection closed before the answer"
        case .reset(let code): "the server reset the stream (\(code))"
        case .goAway(let code): "the server closed the connection with GOAWAY (\(code))"
        case .pingUnanswered: "the server stopped answering (PING unanswered)"
        case .protocolViolation(let detail): "the server's answer broke HTTP/2: \(detail)"
        case .refusedTooOften: "the server refused the push again and again (GOAWAY or REFUSED_STREAM)"
        }
    }
}
