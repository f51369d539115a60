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
    private(set) var state = State.connecting
    private let pool: APNsConnectionPool
    private let authority: String
    private var context: ChannelHandlerContext?
    private var streams: [UInt32: InFlight] = [:]
    /// Streams in the order they were opened, with their deadlines: timeouts are found at the head.
    private var deadlines = CircularBuffer<(UInt32, NIODeadline)>(initialCapacity: 64)
    private var nextStreamID: UInt32 = 1
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (none sent: unlimited, held to `pool.streamCap`).
    private var remoteStreamLimit = Int.max
    private var goAwayLastStreamID: UInt32?
    private var lastInbound = NIODeadline.now()
    private var pingSentAt: NIODeadline?
    private var pingCounter: UInt64 = 0
    private var ticker: RepeatedTask?
    /// Frames written since the last flush: they leave together.
    private var outbound = ByteBuffer()
    /// Pushes written since the last flush.
    private var unflushedPushes = 0
    /// Flush after this many pushes even inside one round: the server starts on the first ones while the rest are
    /// encoded (a whole round in one write leaves each side idle while the other works).
    static let pushesPerFlush = 10
    /// Bytes read that do not make a whole frame yet.
    private var inbound: ByteBuffer?
    /// The largest answer header block taken (APNs answers with a few short fields).
    static let maxHeaderBlock = 64 * 1024
    /// A header block whose CONTINUATION frames have not all arrived.
    private var pendingBlock: (streamID: UInt32, endStream: Bool, block: ByteBuffer)?
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    private var encoder = HPACKRequestEncoder()
    /// The server's window for the whole connection, and its SETTINGS that shape what we send.
    private var connectionSendWindow = HTTP2Wire.defaultWindow
    private var initialStreamWindow = HTTP2Wire.defaultWindow
    private var peerMaxFrameSize = HTTP2Wire.defaultMaxFrameSize
    /// Streams whose body waits for window, oldest first (entries of finished streams are skipped).
    private var waitingForWindow = CircularBuffer<UInt32>()
    /// DATA bytes received since the last connection-level WINDOW_UPDATE: a server that answers with bodies
    /// (errors, or nghttpd's echo) would stall once 64 KiB are in.
    private var unreturnedWindow = 0
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

    // MARK: Sending

    /// Writes one push (HEADERS + DATA) on a new stream; the pool flushes after its round of sends.
    func send(_ job: PushJob, request: APNsRequest, authorization: String?, payload: ByteBuffer, timeout: TimeAmount) {
        guard context != nil, state == .ready else {
            pool.refused([job], by: self)
            return
        }
        let streamID = nextStreamID
        nextStreamID += 2
        writeHeaders(request, authorization: authorization, streamID: streamID)
        var flight = InFlight(job: job, sendWindow: initialStreamWindow)
        flight.unsent = writeBody(payload, streamID: streamID, window: &flight.sendWindow)
        if flight.unsent != nil { waitingForWindow.append(streamID) }
        streams[streamID] = flight
        deadlines.append((streamID, .now() + timeout))
        unflushedPushes += 1
        if unflushedPushes >= Self.pushesPerFlush { flushIfNeeded() }
        // Client stream ids are odd and end at 2^31 - 1: well before that, move to a new connection.
        if nextStreamID > UInt32(Int32.max) - 2048 { beginDraining() }
    }

    private func writeHeaders(_ request: APNsRequest, authorization: String?, streamID: UInt32) {
        // The buffer and the encoder are taken out for the whole request: each access to a property of this class
        // is an exclusivity check.
        Self.writeHeaders(
            request, authority: authority, authorization: authorization, streamID: streamID,
            maxFrameSize: peerMaxFrameSize, encoder: &encoder, into: &outbound)
    }

    private static func writeHeaders(
        _ request: APNsRequest, authority: String, authorization: String?, streamID: UInt32, maxFrameSize: Int,
        encoder: inout HPACKRequestEncoder, into outbound: inout ByteBuffer
    ) {
        let frameStart = outbound.writerIndex
        HTTP2Wire.writeFrameHeader(
            into: &outbound, length: 0, type: .headers, flags: HTTP2Wire.Flag.endHeaders, streamID: streamID)
        let blockStart = outbound.writerIndex
        encoder.writeRequest(request, authority: authority, authorization: authorization, into: &outbound)
        let blockLength = outbound.writerIndex - blockStart
        if blockLength <= maxFrameSize {
            HTTP2Wire.setFrameLength(blockLength, at: frameStart, in: &outbound)
            return
        }
        // Larger than a frame: HEADERS with the first part, CONTINUATION frames with the rest (RFC 9113 6.10).
        var block = outbound.getSlice(at: blockStart, length: blockLength)!
        outbound.moveWriterIndex(to: frameStart)
        var type = HTTP2Wire.FrameType.headers
        while block.readableBytes > 0 {
            let length = min(block.readableBytes, maxFrameSize)
            let last = length == block.readableBytes
            HTTP2Wire.writeFrameHeader(
                into: &outbound, length: length, type: type, flags: last ? HTTP2Wire.Flag.endHeaders : 0,
                streamID: streamID)
            var part = block.readSlice(length: length)!
            outbound.writeBuffer(&part)
            type = .continuation
        }
    }

    /// Writes as much of `body` as the windows and the frame size allow, the last frame with END_STREAM; returns
    /// what is left (nil when all of it went).
    private func writeBody(_ body: ByteBuffer, streamID: UInt32, window: inout Int) -> ByteBuffer? {
        Self.writeBody(
            body, streamID: streamID, maxFrameSize: peerMaxFrameSize, connectionWindow: &connectionSendWindow,
            streamWindow: &window, into: &outbound)
    }

    private static func writeBody(
        _ body: ByteBuffer, streamID: UInt32, maxFrameSize: Int, connectionWindow: inout Int, streamWindow: inout Int,
        into outbound: inout ByteBuffer
    ) -> ByteBuffer? {
        var rest = body
        if rest.readableBytes == 0 {
            HTTP2Wire.writeFrameHeader(
                into: &outbound, length: 0, type: .data, flags: HTTP2Wire.Flag.endStream, streamID: streamID)
            return nil
        }
        while rest.readableBytes > 0 {
            let length = min(rest.readableBytes, maxFrameSize, connectionWindow, streamWindow)
            guard length > 0 else { return rest }
            let last = length == rest.readableBytes
            HTTP2Wire.writeFrameHeader(
                into: &outbound, length: length, type: .data, flags: last ? HTTP2Wire.Flag.endStream : 0,
                streamID: streamID)
            var part = rest.readSlice(length: length)!
            outbound.writeBuffer(&part)
            connectionWindow -= length
            streamWindow -= length
        }
        return nil
    }

    /// Ends a stream's bookkeeping; one whose body still waited for window leaves that queue too, so that it no
    /// longer holds back new streams (see `capacity`).
    @discardableResult
    private func removeStream(_ streamID: UInt32) -> InFlight? {
        guard let flight = streams.removeValue(forKey: streamID) else { return nil }
        if flight.unsent != nil, let index = waitingForWindow.firstIndex(of: streamID) {
            waitingForWindow.remove(at: index)
        }
        return flight
    }

    /// Sends the bodies that waited for window, oldest first, as far as the windows now allow.
    private func resumeWaiting() {
        guard !waitingForWindow.isEmpty else { return }
        var still = CircularBuffer<UInt32>(initialCapacity: waitingForWindow.count)
        while let streamID = waitingForWindow.popFirst() {
            guard var flight = streams[streamID], let unsent = flight.unsent else { continue }
            guard connectionSendWindow > 0 else {
                still.append(streamID)
                continue
            }
            flight.unsent = writeBody(unsent, streamID: streamID, window: &flight.sendWindow)
            if flight.unsent != nil { still.append(streamID) }
            streams[streamID] = flight
        }
        waitingForWindow = still
    }

    /// Sends what was written since the last flush; one flush for many pushes.
    func flushIfNeeded() {
        guard let context, outbound.readableBytes > 0 else { return }
        let bytes = outbound
        outbound = context.channel.allocator.buffer(capacity: max(4096, bytes.readableBytes))
        unflushedPushes = 0
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
    }

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

    // MARK: Frames

    private func handle(_ frame: HTTP2Wire.Frame) throws {
        if let pending = pendingBlock {
            // RFC 9113 6.10: nothing may come between a header block's frames.
            guard frame.type == HTTP2Wire.FrameType.continuation.rawValue, frame.streamID == pending.streamID else {
                throw HTTP2Wire.ConnectionError.protocolError("a header block interrupted by another frame")
            }
            pendingBlock = nil
            var block = pending.block
            var part = frame.payload
            guard block.readableBytes + part.readableBytes <= Self.maxHeaderBlock else {
                throw HTTP2Wire.ConnectionError(
                    code: .enhanceYourCalm, detail: "a header block above \(Self.maxHeaderBlock) bytes")
            }
            block.writeBuffer(&part)
            if frame.has(HTTP2Wire.Flag.endHeaders) {
                try headerBlockEnded(streamID: pending.streamID, block: block, endStream: pending.endStream)
            } else {
                pendingBlock = (pending.streamID, pending.endStream, block)
            }
            return
        }
        switch HTTP2Wire.FrameType(rawValue: frame.type) {
        case .data:
            try onData(frame)
        case .headers:
            guard frame.streamID != 0 else { throw HTTP2Wire.ConnectionError.protocolError("HEADERS on stream 0") }
            var block = try HTTP2Wire.unpadded(frame)
            if frame.has(HTTP2Wire.Flag.priority) {
                guard block.readableBytes >= 5 else {
                    throw HTTP2Wire.ConnectionError.frameSize("HEADERS too short for its priority fields")
                }
                block.moveReaderIndex(forwardBy: 5)
            }
            if frame.has(HTTP2Wire.Flag.endHeaders) {
                try headerBlockEnded(
                    streamID: frame.streamID, block: block, endStream: frame.has(HTTP2Wire.Flag.endStream))
            } else {
                pendingBlock = (frame.streamID, frame.has(HTTP2Wire.Flag.endStream), block)
            }
        case .rstStream:
            var payload = frame.payload
            guard frame.streamID != 0, payload.readableBytes == 4, let code = payload.readInteger(as: UInt32.self)
            else {
                throw HTTP2Wire.ConnectionError.frameSize("a malformed RST_STREAM")
            }
            onReset(streamID: frame.streamID, code: HTTP2ErrorCode(networkCode: Int(code)))
        case .settings:
            try onSettings(frame)
        case .pushPromise:
            throw HTTP2Wire.ConnectionError.protocolError("PUSH_PROMISE, which our SETTINGS_ENABLE_PUSH = 0 forbids")
        case .ping:
            var payload = frame.payload
            guard frame.streamID == 0, payload.readableBytes == 8, let data = payload.readInteger(as: UInt64.self)
            else {
                throw HTTP2Wire.ConnectionError.frameSize("a malformed PING")
            }
            if frame.has(HTTP2Wire.Flag.ack) {
                pingSentAt = nil
            } else {
                HTTP2Wire.writePing(into: &outbound, data: data, ack: true)
            }
        case .goAway:
            var payload = frame.payload
            guard frame.streamID == 0, let last = payload.readInteger(as: UInt32.self),
                let code = payload.readInteger(as: UInt32.self)
            else { throw HTTP2Wire.ConnectionError.frameSize("a malformed GOAWAY") }
            // Debug data: APNs says why in it (`{"reason":"..."}`); kept, printable and short, for the message.
            let debug = payload.readBytes(length: min(payload.readableBytes, 256)).map { bytes in
                String(decoding: bytes.filter { (0x20..<0x7f).contains($0) }, as: UTF8.self)
            }
            goAway(
                lastStreamID: last & 0x7fff_ffff, code: HTTP2ErrorCode(networkCode: Int(code)),
                debug: debug?.isEmpty == false ? debug : nil)
        case .windowUpdate:
            var payload = frame.payload
            guard payload.readableBytes == 4, let raw = payload.readInteger(as: UInt32.self) else {
                throw HTTP2Wire.ConnectionError.frameSize("a malformed WINDOW_UPDATE")
            }
            try onWindowUpdate(streamID: frame.streamID, increment: Int(raw & 0x7fff_ffff))
        case .continuation:
            throw HTTP2Wire.ConnectionError.protocolError("CONTINUATION without a header block before it")
        case .priority, nil:
            // PRIORITY is advice, and frames of unknown types are ignored (RFC 9113 5.5).
            break
        }
    }

    private func headerBlockEnded(streamID: UInt32, block: ByteBuffer, endStream: Bool) throws {
        var block = block
        // Decoded even for a stream we no longer track: the HPACK table must follow the server's.
        let headers: HPACKHeaders
        do { headers = try decoder.decodeHeaders(from: &block) } catch {
            throw HTTP2Wire.ConnectionError.compression("the answer's headers could not be decoded: \(error)")
        }
        guard var flight = streams[streamID] else { return }
        if flight.status == nil {
            guard let status = headers.first(name: ":status").flatMap({ Int($0) }) else {
                removeStream(streamID)
                HTTP2Wire.writeRSTStream(into: &outbound, streamID: streamID, code: .protocolError)
                pool.failed(flight.job, by: self, error: .protocolViolation("an answer without :status"))
                return
            }
            // 1xx: informational, the real answer follows.
            guard status >= 200 else { return }
            flight.status = status
            flight.apnsID = headers.first(name: "apns-id")
        }
        if endStream {
            ended(streamID: streamID, flight)
        } else {
            streams[streamID] = flight
        }
    }

    private func onData(_ frame: HTTP2Wire.Frame) throws {
        guard frame.streamID != 0 else { throw HTTP2Wire.ConnectionError.protocolError("DATA on stream 0") }
        // Flow control counts the whole payload, padding included.
        let length = frame.payload.readableBytes
        unreturnedWindow += length
        if unreturnedWindow >= 32_768 {
            HTTP2Wire.writeWindowUpdate(into: &outbound, streamID: 0, increment: unreturnedWindow)
            unreturnedWindow = 0
        }
        let data = try HTTP2Wire.unpadded(frame)
        guard var flight = streams[frame.streamID] else { return }
        if flight.body.count < 64 * 1024 { flight.body.append(contentsOf: data.readableBytesView) }
        if frame.has(HTTP2Wire.Flag.endStream) {
            ended(streamID: frame.streamID, flight)
            return
        }
        flight.unreturned += length
        if flight.unreturned >= 32_768 {
            HTTP2Wire.writeWindowUpdate(into: &outbound, streamID: frame.streamID, increment: flight.unreturned)
            flight.unreturned = 0
        }
        streams[frame.streamID] = flight
    }

    /// The server ended its side of the stream: the answer is complete.
    private func ended(streamID: UInt32, _ flight: InFlight) {
        removeStream(streamID)
        if flight.unsent != nil {
            // Answered before the whole request went (RFC 9113 8.1): the rest is not needed.
            HTTP2Wire.writeRSTStream(into: &outbound, streamID: streamID, code: .cancel)
        }
        answer(flight)
    }

    private func onReset(streamID: UInt32, code: HTTP2ErrorCode) {
        guard let flight = removeStream(streamID) else { return }
        if code == .refusedStream {
            // RFC 9113 8.7: a refused stream was not processed; it is safe to send again at once.
            pool.refused([flight.job], by: self)
        } else if let status = flight.status, status != 200 || code == .noError {
            // Answered, then reset (a server may answer before reading the whole body).
            answer(flight)
        } else {
            pool.failed(flight.job, by: self, error: .reset(code))
        }
    }

    private func onSettings(_ frame: HTTP2Wire.Frame) throws {
        guard frame.streamID == 0 else { throw HTTP2Wire.ConnectionError.protocolError("SETTINGS on a stream") }
        if frame.has(HTTP2Wire.Flag.ack) { return }
        var payload = frame.payload
        guard payload.readableBytes % 6 == 0 else {
            throw HTTP2Wire.ConnectionError.frameSize("SETTINGS of \(payload.readableBytes) bytes")
        }
        while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch HTTP2Wire.Setting(rawValue: identifier) {
            case .headerTableSize:
                encoder.peerTableSizeChanged(to: Int(value))
            case .maxConcurrentStreams:
                remoteStreamLimit = Int(value)
            case .initialWindowSize:
                guard Int(value) <= HTTP2Wire.maxWindow else {
                    throw HTTP2Wire.ConnectionError.flowControl("SETTINGS_INITIAL_WINDOW_SIZE \(value)")
                }
                // RFC 9113 6.9.2: every open stream's window moves by the difference (it may go below zero).
                let delta = Int(value) - initialStreamWindow
                initialStreamWindow = Int(value)
                for streamID in waitingForWindow { streams[streamID]?.sendWindow += delta }
            case .maxFrameSize:
                guard (16_384...16_777_215).contains(value) else {
                    throw HTTP2Wire.ConnectionError.protocolError("SETTINGS_MAX_FRAME_SIZE \(value)")
                }
                peerMaxFrameSize = Int(value)
            case .enablePush, .maxHeaderListSize, nil:
                break
            }
        }
        HTTP2Wire.writeSettingsAck(into: &outbound)
        resumeWaiting()
        if state == .connecting {
            state = .ready
            pool.connectionReady(self)
        } else {
            pool.capacityChanged(self)
        }
    }

    private func onWindowUpdate(streamID: UInt32, increment: Int) throws {
        if streamID == 0 {
            guard increment > 0 else {
                throw HTTP2Wire.ConnectionError.protocolError("a WINDOW_UPDATE of 0 for the connection")
            }
            connectionSendWindow += increment
            guard connectionSendWindow <= HTTP2Wire.maxWindow else {
                throw HTTP2Wire.ConnectionError.flowControl("the connection's window above 2^31 - 1")
            }
        } else if increment > 0, streams[streamID] != nil {
            streams[streamID]!.sendWindow += increment
        }
        resumeWaiting()
    }

    /// The server broke the protocol: GOAWAY with the reason, then close; the streams in flight go elsewhere.
    private func connectionError(_ error: HTTP2Wire.ConnectionError) {
        HTTP2Wire.writeGoAway(into: &outbound, lastStreamID: 0, code: error.code)
        flushIfNeeded()
        inbound = nil
        pendingBlock = nil
        // Closed from now on: nothing more is read or sent here, and the pushes in flight go elsewhere at once, not
        // when TLS has finished closing.
        abandon(.protocolViolation(error.detail))
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
    private func goAway(lastStreamID: UInt32, code: HTTP2ErrorCode, debug: String?) {
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
