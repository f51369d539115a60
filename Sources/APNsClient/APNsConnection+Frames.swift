import NIOCore
import NIOHPACK
import NIOHTTP2

/// Reading: each frame the server sends (header blocks, DATA, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE)
/// applied to the streams and the windows, and a protocol breach answered with GOAWAY.
extension APNsConnection {
    func handle(_ frame: HTTP2Wire.Frame) throws {
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
    func connectionError(_ error: HTTP2Wire.ConnectionError) {
        HTTP2Wire.writeGoAway(into: &outbound, lastStreamID: 0, code: error.code)
        flushIfNeeded()
        inbound = nil
        pendingBlock = nil
        // Closed from now on: nothing more is read or sent here, and the pushes in flight go elsewhere at once, not
        // when TLS has finished closing.
        abandon(.protocolViolation(error.detail))
    }
}
