import APNsCore
import Essentials
import NIOCore
import NIOHPACK
import NIOHTTP2

/// One HTTP/2 connection to APNs, spoken byte by byte (`HTTP2Wire`): it owns its streams, encodes its requests'
/// headers (HPACK), reads answers, obeys the server's SETTINGS, flow control, GOAWAY and resets, watches for a dead
/// peer with PING, and reports every outcome to its pool.
///
/// No HTTP/2 library in between: a push is a HEADERS and a DATA frame appended to one buffer and one entry in
/// `streams`, and the pool flushes once per round of sends, so the frames of many pushes leave in one TLS record and
/// one `write`. (swift-nio-http2's general state machine cost about half of the sender's CPU; a client that only
/// opens request streams needs little of it.) Everything runs on the pool's event loop.
///
/// Sending is in APNsConnection+Sending.swift, the frames read in APNsConnection+Frames.swift.
final class APNsConnection: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

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
        /// What the server still lets this stream send (its flow-control window for the stream).
        var sendWindow: Int
        /// The part of the request body that flow control held back; nil once END_STREAM is written.
        var unsent: ByteBuffer?
        /// DATA bytes received on the stream and not yet returned with a WINDOW_UPDATE.
        var unreturned = 0
    }

    let number: Int
    var state = State.connecting
    let pool: APNsConnectionPool
    let authority: String
    var context: ChannelHandlerContext?
    var streams: [UInt32: InFlight] = [:]
    /// Streams in the order they were opened, with their deadlines: timeouts are found at the head.
    var deadlines = CircularBuffer<(UInt32, NIODeadline)>(initialCapacity: 64)
    var nextStreamID: UInt32 = 1
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (none sent: unlimited, held to `pool.streamCap`).
    var remoteStreamLimit = Int.max
    private var goAwayLastStreamID: UInt32?
    private var lastInbound = NIODeadline.now()
    var pingSentAt: NIODeadline?
    private var pingCounter: UInt64 = 0
    private var ticker: RepeatedTask?
    /// Frames written since the last flush: they leave together.
    var outbound = ByteBuffer()
    /// Pushes written since the last flush.
    var unflushedPushes = 0
    /// Flush after this many pushes even inside one round: the server starts on the first ones while the rest are
    /// encoded (a whole round in one write leaves each side idle while the other works).
    static let pushesPerFlush = 10
    /// Bytes read that do not make a whole frame yet.
    var inbound: ByteBuffer?
    /// The largest answer header block taken (APNs answers with a few short fields).
    static let maxHeaderBlock = 64 * 1024
    /// A header block whose CONTINUATION frames have not all arrived.
    var pendingBlock: (streamID: UInt32, endStream: Bool, block: ByteBuffer)?
    var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    var encoder = HPACKRequestEncoder()
    /// The server's window for the whole connection, and its SETTINGS that shape what we send.
    var connectionSendWindow = HTTP2Wire.defaultWindow
    var initialStreamWindow = HTTP2Wire.defaultWindow
    var peerMaxFrameSize = HTTP2Wire.defaultMaxFrameSize
    /// Streams whose body waits for window, oldest first (entries of finished streams are skipped).
    var waitingForWindow = CircularBuffer<UInt32>()
    /// DATA bytes received since the last connection-level WINDOW_UPDATE: a server that answers with bodies
    /// (errors, or nghttpd's echo) would stall once 64 KiB are in.
    var unreturnedWindow = 0
    private var prefaceSent = false
    /// When the connection must be ready (TCP, TLS and the server's SETTINGS) or be given up.
    private var setupDeadline = NIODeadline.distantFuture
    /// Why the connection failed, for the pool's message (the first error seen wins).
    private(set) var failure: (any Error)?

    init(number: Int, pool: APNsConnectionPool, authority: String) {
        self.number = number
        self.pool = pool
        self.authority = authority
    }

    /// Streams this connection can open now (none while bodies already wait for the connection's window).
    var capacity: Int {
        guard state == .ready else { return 0 }
        if connectionSendWindow <= 0, !waitingForWindow.isEmpty { return 0 }
        return max(0, min(remoteStreamLimit, pool.streamCap) - streams.count)
    }

    var inFlightCount: Int { streams.count }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        outbound = context.channel.allocator.buffer(capacity: 4096)
        lastInbound = .now()
        setupDeadline = .now() + pool.connectTimeout
        ticker = context.eventLoop.scheduleRepeatedTask(initialDelay: pool.tick, delay: pool.tick) { [weak self] _ in
            self?.onTick()
        }
        if context.channel.isActive { sendPreface() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        ticker?.cancel()
        ticker = nil
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        // TLS buffers these until its handshake is done.
        sendPreface()
        context.fireChannelActive()
    }

    /// The client preface and our SETTINGS: no server push; the defaults for the rest.
    private func sendPreface() {
        guard !prefaceSent else { return }
        prefaceSent = true
        outbound.writeStaticString(HTTP2Wire.preface)
        HTTP2Wire.writeSettings(into: &outbound, [(.enablePush, 0), (.maxConcurrentStreams, 100)])
        flushIfNeeded()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state != .closed else { return }
        var bytes = unwrapInboundIn(data)
        lastInbound = .now()
        if inbound == nil {
            inbound = bytes
        } else {
            inbound!.writeBuffer(&bytes)
        }
        do {
            while state != .closed,
                let frame = try HTTP2Wire.readFrame(from: &inbound!, maxFrameSize: HTTP2Wire.defaultMaxFrameSize)
            {
                try handle(frame)
            }
        } catch let error as HTTP2Wire.ConnectionError {
            connectionError(error)
            return
        } catch {
            connectionError(.protocolError("\(error)"))
            return
        }
        if inbound?.readableBytes == 0 {
            inbound = nil
        } else if let readerIndex = inbound?.readerIndex, readerIndex > 65_536 {
            inbound!.discardReadBytes()
        }
        closeIfDrained()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Answers read in this loop made room: the pool sends more, and everything goes out in one flush.
        pool.pump()
        flushIfNeeded()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
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
        waitingForWindow.removeAll()
        pool.connectionClosed(self, wasReady: wasReady, lost: lost)
    }

    /// Gives up on a peer that stopped answering: its pushes go elsewhere now, not when TLS finishes closing (which
    /// waits for a peer that will not answer).
    func abandon(_ error: APNsTransportError) {
        failure = failure ?? error
        settle()
        context?.close(promise: nil)
    }

    // MARK: Rules

    func answer(_ flight: InFlight) {
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
    func goAway(lastStreamID: UInt32, code: HTTP2ErrorCode, debug: String?) {
        let last = min(lastStreamID, goAwayLastStreamID ?? lastStreamID)
        goAwayLastStreamID = last
        let unprocessed = streams.keys.filter { $0 > last }.sorted()
        let jobs = unprocessed.compactMap { removeStream($0)?.job }
        if code != .noError || debug != nil { failure = failure ?? APNsTransportError.goAway(code, debug: debug) }
        beginDraining()
        if !jobs.isEmpty { pool.refused(jobs, by: self) }
    }

    /// Takes no new streams from now on; the pool opens a replacement before this one is gone.
    func beginDraining() {
        guard state == .ready || state == .connecting else { return }
        state = .draining
        pool.connectionDraining(self)
        closeIfDrained()
    }

    /// A draining connection whose last stream ended closes, after sending what was written (ACKs, resets).
    @discardableResult
    private func closeIfDrained() -> Bool {
        guard state == .draining, streams.isEmpty else { return false }
        flushIfNeeded()
        context?.close(promise: nil)
        return true
    }

    /// Closes now; streams in flight are reported lost.
    func close() -> EventLoopFuture<Void> {
        guard let context else { return pool.loop.makeSucceededVoidFuture() }
        return context.close().recover { _ in }
    }

    private func onTick() {
        guard context != nil, state != .closed else { return }
        let now = NIODeadline.now()
        if state == .connecting {
            // TLS or HTTP/2 set-up that never completes (a peer that accepts and stays silent): given up after the
            // connect timeout, so the pool tries again or reports it, rather than waiting on it for ever.
            if now >= setupDeadline { abandon(.setupTimedOut) }
            return
        }
        var expired: [InFlight] = []
        while let (streamID, deadline) = deadlines.first {
            guard let flight = streams[streamID] else {
                deadlines.removeFirst()
                continue
            }
            guard deadline <= now else { break }
            deadlines.removeFirst()
            removeStream(streamID)
            expired.append(flight)
            // Tell the server we gave up (RST_STREAM(CANCEL)), so it can drop the work.
            HTTP2Wire.writeRSTStream(into: &outbound, streamID: streamID, code: .cancel)
        }
        for flight in expired { pool.failed(flight.job, by: self, error: .timeout) }
        if let pingSentAt {
            if now - pingSentAt > pool.pingTimeout {
                abandon(.pingUnanswered)
                return
            }
        } else if state != .connecting, now - lastInbound >= pool.pingInterval {
            pingCounter &+= 1
            pingSentAt = now
            HTTP2Wire.writePing(into: &outbound, data: pingCounter, ack: false)
        }
        if closeIfDrained() { return }
        flushIfNeeded()
        if !expired.isEmpty { pool.pump() }
    }
}

/// Transport failures of the HTTP/2 client, as users read them.
enum APNsTransportError: Error, CustomStringConvertible, Equatable {
    case timeout
    case closedBeforeAnswer
    case reset(HTTP2ErrorCode)
    case goAway(HTTP2ErrorCode, debug: String?)
    case pingUnanswered
    case setupTimedOut
    case protocolViolation(String)
    case refusedTooOften

    var description: String {
        switch self {
        case .timeout: "no answer in time (the stream was reset)"
        case .closedBeforeAnswer: "the connection closed before the answer"
        case .reset(let code): "the server reset the stream (\(code))"
        case .goAway(let code, let debug):
            "the server closed the connection with GOAWAY (\(code))" + (debug.map { ": \($0)" } ?? "")
        case .pingUnanswered: "the server stopped answering (PING unanswered)"
        case .setupTimedOut: "the TLS and HTTP/2 set-up did not complete in time (no SETTINGS from the server)"
        case .protocolViolation(let detail): "the server's answer broke HTTP/2: \(detail)"
        case .refusedTooOften: "the server refused the push again and again (GOAWAY or REFUSED_STREAM)"
        }
    }
}
