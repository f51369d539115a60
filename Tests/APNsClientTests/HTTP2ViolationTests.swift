import APNsClient
import APNsCore
import Foundation
import MockAPNs
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import TestSupport
import Testing

/// A TLS + HTTP/2 server that breaks the protocol on purpose, written here frame by frame: it sends its SETTINGS,
/// then answers each request's HEADERS with `reply`, and records the GOAWAY error codes the client sends.
private final class BrokenHTTP2Handler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var received = ByteBuffer()
    private var prefaceSeen = false
    private let reply: (UInt32) -> [UInt8]
    private let goAways: NIOLockedValueBox<[UInt32]>

    init(reply: @escaping (UInt32) -> [UInt8], goAways: NIOLockedValueBox<[UInt32]>) {
        self.reply = reply
        self.goAways = goAways
    }

    func channelActive(context: ChannelHandlerContext) {
        // An empty SETTINGS frame: the connection is ready.
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [0, 0, 0, 4, 0, 0, 0, 0, 0])), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.writeBuffer(&bytes)
        if !prefaceSeen {
            guard received.readableBytes >= 24 else { return }
            received.moveReaderIndex(forwardBy: 24)
            prefaceSeen = true
        }
        while received.readableBytes >= 9, let header = received.getBytes(at: received.readerIndex, length: 9) {
            let length = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
            guard received.readableBytes >= 9 + length else { return }
            received.moveReaderIndex(forwardBy: 9)
            let payload = received.readBytes(length: length)!
            let streamID =
                UInt32(header[5] & 0x7f) << 24 | UInt32(header[6]) << 16 | UInt32(header[7]) << 8
                | UInt32(header[8])
            switch header[3] {
            case 0x1:  // HEADERS: the request
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply(streamID))), promise: nil)
            case 0x7:  // GOAWAY: last stream id, then the error code
                let code =
                    UInt32(payload[4]) << 24 | UInt32(payload[5]) << 16 | UInt32(payload[6]) << 8
                    | UInt32(payload[7])
                goAways.withLockedValue { $0.append(code) }
            default:
                break
            }
        }
    }
}

/// Serves `reply` over TLS with ALPN h2 on a port of 127.0.0.1 while `body` runs.
private func withBrokenServer<T: Sendable>(
    reply: @escaping @Sendable (UInt32) -> [UInt8], _ body: (String, NIOLockedValueBox<[UInt32]>) async throws -> T
) async throws -> T {
    var tls = TLSConfiguration.makeServerConfiguration(
        certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(authority.serverCertificatePEM.utf8)).map {
            .certificate($0)
        },
        privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem)))
    tls.applicationProtocols = ["h2"]
    let context = try NIOSSLContext(configuration: tls)
    let goAways = NIOLockedValueBox<[UInt32]>([])
    let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                try channel.pipeline.syncOperations.addHandler(BrokenHTTP2Handler(reply: reply, goAways: goAways))
            }
        }
        .bind(host: "127.0.0.1", port: 0).get()
    do {
        let result = try await body("https://127.0.0.1:\(server.localAddress!.port!)", goAways)
        try await server.close()
        return result
    } catch {
        try? await server.close()
        throw error
    }
}

@Suite("A server that breaks HTTP/2: the client ends the connection, says why, and sends again elsewhere")
struct HTTP2ViolationTests {
    /// What the server answers, the words the result must carry, and the GOAWAY code the client must send.
    static let breaches: [(detail: String, code: UInt32, reply: @Sendable (UInt32) -> [UInt8])] = [
        // PUSH_PROMISE, which the client's SETTINGS_ENABLE_PUSH = 0 forbids: PROTOCOL_ERROR.
        ("PUSH_PROMISE", 0x1, { stream in [0, 0, 4, 5, 4] + bytes(stream) + bytes(2) }),
        // A frame longer than the 16,384 bytes the client allows: FRAME_SIZE_ERROR.
        ("a frame of 20000 bytes", 0x6, { stream in [0, 0x4e, 0x20, 0, 0] + bytes(stream) }),
        // A header block HPACK cannot decode (an index past both tables): COMPRESSION_ERROR.
        ("could not be decoded", 0x9, { stream in [0, 0, 1, 1, 5] + bytes(stream) + [0xff] }),
    ]

    @Test(
        "answers the client cannot take end the connection with GOAWAY and its code; each attempt on a new connection, the reason in the result",
        arguments: 0..<breaches.count)
    func violation(_ index: Int) async throws {
        let (detail, code, reply) = Self.breaches[index]
        try await withBrokenServer(reply: reply) { base, goAways in
            let retry = RetryPolicy(maxAttempts: 2, baseDelay: 0.01, maxDelay: 0.02)
            try await withSender(try makeSender(base, retry: retry, requestTimeout: .seconds(5))) { sender in
                let started = ContinuousClock.now
                let results = await sender.send([push()], concurrency: 1)
                #expect(results.first?.status == nil)
                #expect(results.first?.attempts == 2)
                let message = results.first?.transportError ?? ""
                #expect(message.contains("broke HTTP/2") && message.contains(detail), "\(message)")
                #expect(await sender.statistics().connectionsOpened == 2)
                // Not a timeout: each connection ends as soon as the bad frame arrives.
                #expect(ContinuousClock.now - started < .seconds(3))
            }
            // Flushed before the close: the server saw each GOAWAY with its code.
            try await Task.sleep(for: .milliseconds(100))
            #expect(goAways.withLockedValue { $0 } == [code, code])
        }
    }
}

/// A stream id as the 4 bytes of a frame header.
private func bytes(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
}
