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
            try await withSender(try makeSender(base, retry: retry, requestTimeout: .seconds(60))) { sender in
                let started = ContinuousClock.now
                let results = await sender.send([push()], concurrency: 1)
                #expect(results.first?.status == nil)
                #expect(results.first?.attempts == 2)
                let message = results.first?.transportError ?? ""
                #expect(message.contains("broke HTTP/2") && message.contains(detail), "\(message)")
                #expect(await sender.statistics().connectionsOpened == 2)
                // Not a timeout (60 s): each connection ends as soon as the bad frame arrives.
                #expect(ContinuousClock.now - started < .seconds(20))
            }
            // Flushed before the close: the server saw each GOAWAY with its code.
            let deadline = ContinuousClock.now + .seconds(5)
            while goAways.withLockedValue({ $0.count }) < 2, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(goAways.withLockedValue { $0 } == [code, code])
        }
    }
}

@Suite("Servers that stall the client: set-up that never ends, a window that never opens")
struct HTTP2StallTests {
    @Test("a server that accepts TCP and never answers TLS is given up after the connect timeout, with the reason")
    func silentSetUp() async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let base = "https://127.0.0.1:\(server.localAddress!.port!)"
        let sender = try makeSender(
            base, retry: RetryPolicy(maxAttempts: 1), connectTimeout: .milliseconds(500))
        try await withSender(sender) { sender in
            let started = ContinuousClock.now
            let watchdog = Task {
                try await Task.sleep(for: .seconds(30))
                try await sender.shutdown()
            }
            let results = await sender.send([push()], concurrency: 1)
            watchdog.cancel()
            #expect(results.first?.status == nil)
            let message = results.first?.transportError ?? ""
            #expect(message.contains("did not complete in time"), "\(message)")
            // The connect timeout (0.5 s), not the watchdog (30 s).
            #expect(ContinuousClock.now - started < .seconds(20))
        }
        try await server.close()
    }

    @Test("answers that come before the bodies, with a connection window that never opens: every push answered")
    func answeredWhileBodiesWait() async throws {
        // HEADERS `:status: 200` (static index 8) with END_STREAM, at once, and never a WINDOW_UPDATE: after
        // 65,535 bytes of 4,096-byte bodies the connection window stays at 0. Streams answered while their bodies
        // wait must stop holding back the pushes behind them.
        try await withBrokenServer(reply: { stream in [0, 0, 1, 1, 5] + bytes(stream) + [0x88] }) { base, _ in
            let sender = try makeSender(base, retry: RetryPolicy(maxAttempts: 1), requestTimeout: .seconds(30))
            try await withSender(sender) { sender in
                let requests = (0..<60).map { push(token: String(format: "%064x", $0), payload: sizedPayload(4096)) }
                // Stops the sender if it stalls, so a regression fails here instead of hanging the suite.
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(10))
                    try await sender.shutdown()
                }
                let results = await sender.send(requests, concurrency: 60)
                watchdog.cancel()
                #expect(results.count == 60)
                #expect(results.allSatisfy { $0.status == 200 }, "\(results.filter { $0.status != 200 }.prefix(2))")
            }
        }
    }
}

@Suite("A GOAWAY's debug data reaches the result")
struct GoAwayReasonTests {
    @Test(
        "a server that answers every push with GOAWAY {\"reason\":\"Shutdown\"}: refused again and again, and the result says why"
    )
    func reasonInResult() async throws {
        let debug = Array(#"{"reason":"Shutdown"}"#.utf8)
        // GOAWAY: last stream id 0 (nothing processed), NO_ERROR, then the debug data.
        let goAway: [UInt8] = [0, 0, UInt8(8 + debug.count), 7, 0, 0, 0, 0, 0] + bytes(0) + bytes(0) + debug
        try await withBrokenServer(reply: { _ in goAway }) { base, _ in
            try await withSender(try makeSender(base, retry: RetryPolicy(maxAttempts: 1))) { sender in
                let results = await sender.send([push()], concurrency: 1)
                let message = results.first?.transportError ?? ""
                #expect(results.first?.status == nil)
                #expect(message.contains("refused the push again and again"), "\(message)")
                #expect(message.contains(#"{"reason":"Shutdown"}"#), "\(message)")
                // Not processed, so never counted as an attempt.
                #expect(results.first?.attempts == 1)
            }
        }
    }
}

/// A stream id as the 4 bytes of a frame header.
private func bytes(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
}
