import APNsCore
import NIOCore

/// Sending: a push written as HEADERS (HPACK, CONTINUATION past the frame size) and DATA frames within the flow-control
/// windows, the bodies that wait for window resumed, and one flush for many pushes.
extension APNsConnection {
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
    func removeStream(_ streamID: UInt32) -> InFlight? {
        guard let flight = streams.removeValue(forKey: streamID) else { return nil }
        if flight.unsent != nil, let index = waitingForWindow.firstIndex(of: streamID) {
            waitingForWindow.remove(at: index)
        }
        return flight
    }

    /// Sends the bodies that waited for window, oldest first, as far as the windows now allow.
    func resumeWaiting() {
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
}
