import APNsCore
import Foundation
import NIOCore
import NIOHPACK
import TestSupport
import Testing

@testable import APNsClient

/// The client's HPACK encoder, checked by swift-nio-http2's decoder (another implementation of RFC 7541): every
/// block decodes to the fields written, with the decoder's table following ours across evictions and size changes.
@Suite("HPACK of the sender's requests, decoded by swift-nio-http2's decoder")
struct HPACKRequestEncoderTests {
    /// Encodes one request's header block as `APNsConnection` does, and returns it.
    private func block(
        _ encoder: inout HPACKRequestEncoder, token: String, authorization: String, topic: String, apnsID: String?,
        contentLength: Int
    ) -> ByteBuffer {
        var buffer = ByteBuffer()
        let request = push(
            token: token, topic: topic, apnsID: apnsID, payload: [UInt8](repeating: 0x20, count: contentLength))
        encoder.writeRequest(request, authority: "api.push.apple.com", authorization: authorization, into: &buffer)
        return buffer
    }

    private func expected(token: String, authorization: String, topic: String, apnsID: String?, contentLength: Int)
        -> [String]
    {
        var fields = [
            ":method: POST", ":scheme: https", ":path: /3/device/\(token)", ":authority: api.push.apple.com",
            "authorization: \(authorization)", "apns-topic: \(topic)", "apns-push-type: alert", "apns-priority: 10",
        ]
        if let apnsID { fields.append("apns-id: \(apnsID)") }
        fields += ["content-type: application/json", "content-length: \(contentLength)"]
        return fields
    }

    private func decode(_ decoder: inout HPACKDecoder, _ block: ByteBuffer) throws -> [String] {
        var block = block
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(block.readableBytes == 0)
        return headers.map { "\($0.name): \($0.value)" }
    }

    @Test("repeating fields are sent once, then as indexes; unique ones stay literals")
    func indexesRepeatingFields() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        // 300 bytes: its length needs the integer's continuation bytes (RFC 7541 5.1).
        let authorization = "bearer " + String(repeating: "j", count: 293)
        var sizes: [Int] = []
        for (index, length) in [0, 9, 10, 4096, 123_456].enumerated() {
            let token = String(format: "%064x", index)
            let apnsID = index.isMultiple(of: 2) ? UUID().uuidString : nil
            let encoded = block(
                &encoder, token: token, authorization: authorization, topic: "com.example.app", apnsID: apnsID,
                contentLength: length)
            sizes.append(encoded.readableBytes)
            #expect(
                try decode(&decoder, encoded)
                    == expected(
                        token: token, authorization: authorization, topic: "com.example.app", apnsID: apnsID,
                        contentLength: length))
        }
        // The first block carries the 300-byte value; the next ones an index for it (one byte).
        #expect(sizes[0] > 300)
        #expect(sizes[1] < 100)
    }

    @Test("values that keep changing evict the oldest entries, and the decoder's table stays in step")
    func evictions() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for index in 0..<500 {
            // 40 topics of 100 bytes cycle through a 4,096-byte table that holds about 30 of them.
            let topic = "com.example.\(index % 40)." + String(repeating: "t", count: 80)
            let authorization = "bearer token-\(index / 100)"
            let token = String(format: "%064x", index)
            let encoded = block(
                &encoder, token: token, authorization: authorization, topic: topic, apnsID: nil, contentLength: index)
            #expect(
                try decode(&decoder, encoded)
                    == expected(
                        token: token, authorization: authorization, topic: topic, apnsID: nil, contentLength: index))
        }
    }

    @Test("a server's smaller table is signalled at the start of the next block, and never exceeded")
    func tableSizeChanges() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let authorization = "bearer " + String(repeating: "k", count: 200)
        func roundTrip(_ index: Int) throws {
            let token = String(format: "%064x", index)
            let encoded = block(
                &encoder, token: token, authorization: authorization, topic: "com.example.app", apnsID: nil,
                contentLength: 7)
            #expect(
                try decode(&decoder, encoded)
                    == expected(
                        token: token, authorization: authorization, topic: "com.example.app", apnsID: nil,
                        contentLength: 7))
        }
        try roundTrip(0)
        // SETTINGS_HEADER_TABLE_SIZE 100, then 0, then 200 before the next block: the decoder (told the same
        // limit) refuses a block that does not start by shrinking its table.
        for sizes in [[100], [0, 200], [4096], [0]] {
            for size in sizes { encoder.peerTableSizeChanged(to: size) }
            decoder.maxDynamicTableLength = sizes.max()!
            try roundTrip(1)
            try roundTrip(2)
        }
        #expect(encoder.capacity == 0)
    }
}

@Suite("HTTP/2 frames as the sender reads them")
struct HTTP2FrameReaderTests {
    @Test("a frame is taken only when all its bytes are in; a frame above the advertised size is refused")
    func partialAndOversized() throws {
        var buffer = ByteBuffer()
        HTTP2Wire.writeFrameHeader(into: &buffer, length: 5, type: .data, flags: 0x9, streamID: 3)
        buffer.writeBytes([4, 1, 2, 3, 4])
        var partial = buffer.getSlice(at: 0, length: 12)!
        #expect(try HTTP2Wire.readFrame(from: &partial, maxFrameSize: 16_384) == nil)
        #expect(partial.readableBytes == 12)
        let frame = try #require(try HTTP2Wire.readFrame(from: &buffer, maxFrameSize: 16_384))
        #expect(frame.type == 0 && frame.streamID == 3 && frame.has(HTTP2Wire.Flag.endStream))
        // PADDED: a pad length of 4 leaves no data.
        #expect(try HTTP2Wire.unpadded(frame).readableBytes == 0)

        var big = ByteBuffer()
        HTTP2Wire.writeFrameHeader(into: &big, length: 16_385, type: .data, streamID: 1)
        #expect(throws: HTTP2Wire.ConnectionError.self) { try HTTP2Wire.readFrame(from: &big, maxFrameSize: 16_384) }

        var badPadding = ByteBuffer()
        HTTP2Wire.writeFrameHeader(into: &badPadding, length: 2, type: .data, flags: HTTP2Wire.Flag.padded, streamID: 1)
        badPadding.writeBytes([2, 0])
        let padded = try #require(try HTTP2Wire.readFrame(from: &badPadding, maxFrameSize: 16_384))
        #expect(throws: HTTP2Wire.ConnectionError.self) { try HTTP2Wire.unpadded(padded) }
    }
}

/// The sender against nghttp2's server, with the options that make it use the parts of HTTP/2 our other peers do
/// not: padded frames, small HPACK tables on either side, tiny flow-control windows, trailers, a stream limit.
@Suite("Sender against nghttpd's HTTP/2 options (a server nobody here wrote)", .serialized)
struct NghttpdWireTests {
    static let tokens = (0..<400).map { String(format: "%064x", 0x5eed_0000 + $0) }

    static let cases: [(String, [String], Int, Int)] = [
        // (what it exercises, nghttpd's options, the payload's size, each answer's body size)
        ("padding on every frame", ["--padding=255"], 300, 100),
        ("the server's HPACK decoder table set to 0", ["--header-table-size=0"], 300, 0),
        ("the server's HPACK decoder table smaller than the authorization", ["--header-table-size=150"], 300, 0),
        ("the server's HPACK encoder table set to 64 bytes", ["--encoder-header-table-size=64"], 300, 0),
        (
            "1 KiB stream windows and a 16 KiB connection window", ["--window-bits=10", "--connection-window-bits=14"],
            4000, 0
        ),
        ("answers of 100,000 bytes (our windows must be returned)", [], 300, 100_000),
        ("trailers after each answer", ["--trailer=x-trailer: yes"], 300, 10),
        ("at most 3 streams at a time", ["--max-concurrent-streams=3"], 300, 0),
    ]

    @Test("every push answered 200", arguments: 0..<cases.count)
    func everyPushAnswered(_ index: Int) async throws {
        let (name, options, payloadSize, bodySize) = Self.cases[index]
        let requests = Self.tokens.map { push(token: $0, payload: sizedPayload(payloadSize)) }
        try await withNghttpd(tokens: Self.tokens, bodySize: bodySize, options: options) { base in
            try await withSender(try makeSender(base, retry: RetryPolicy(maxAttempts: 1), requestTimeout: .seconds(10)))
            {
                sender in
                let results = await sender.send(requests, concurrency: 100)
                let failed = results.filter { $0.status != 200 }
                #expect(failed.isEmpty, "\(name): \(failed.count) not 200, e.g. \(failed.prefix(2))")
                #expect(results.count == requests.count)
                let statistics = await sender.statistics()
                #expect(statistics.connectionsOpened == 1, "\(name): \(statistics)")
            }
        }
    }

    @Test("a token without a file is the server's 404, not a transport failure")
    func notFound() async throws {
        try await withNghttpd(tokens: [], options: []) { base in
            try await withSender(try makeSender(base, retry: RetryPolicy(maxAttempts: 1))) { sender in
                let results = await sender.send([push(token: String(repeating: "a", count: 64))], concurrency: 1)
                #expect(results.map(\.status) == [404])
                #expect(results.first?.transportError == nil)
            }
        }
    }
}
