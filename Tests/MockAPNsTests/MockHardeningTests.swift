import APNsClient
import APNsCore
import AsyncHTTPClient
import Essentials
import Foundation
import MockAPNs
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import TestSupport
import Testing

/// The mock must survive whatever a client sends, like the service it stands in for.
@Suite("Mock APNs: hostile clients")
struct MockHardeningTests {
    @Test("a validly signed provider token with iat at Int64.min is refused with 403, and the mock keeps serving")
    func extremeIssuedAt() async throws {
        try await withMock { base, _ in
            let ancient = FixedWallClock(epochSeconds: -9_223_372_036_854_775_808.0)
            let manager = APNsTokenManager(keyID: "KEYID12345", teamID: "TEAMID6789", key: signingKey, clock: ancient)
            let hostile = try makeSender(base, retry: RetryPolicy(maxAttempts: 1), credentials: .token(manager))
            let refused = try await withSender(hostile) { await $0.send(push()) }
            #expect(refused.status == 403)
            #expect(refused.reason == .expiredProviderToken)
            let normal = try await withSender(try makeSender(base)) { await $0.send(push()) }
            #expect(normal.status == 200)
        }
    }

    @Test("after a connection error the mock sends GOAWAY and closes the connection")
    func closesAfterGoaway() async throws {
        try await withMock { base, _ in
            let port = Int(base.split(separator: ":").last!)!
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(authority.caCertificatePEM.utf8)))
            tls.applicationProtocols = ["h2"]
            let context = try NIOSSLContext(configuration: tls)
            let received = NIOLockedValueBox<[UInt8]>([])
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            try NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                        try channel.pipeline.syncOperations.addHandler(Collector(received: received))
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
            // Not the HTTP/2 connection preface: a protocol error.
            try await channel.writeAndFlush(
                ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + String(repeating: "z", count: 100)))
            let closed = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await channel.closeFuture.get()
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(5))
                    return false
                }
                let first = try await group.next()!
                group.cancelAll()
                return first
            }
            if !closed { try? await channel.close() }
            #expect(closed, "the connection stayed open after GOAWAY")
            // A GOAWAY frame (type 0x7) came before the close.
            let bytes = received.withLockedValue { $0 }
            #expect(bytes.count >= 9 && bytes.indices.contains(3) && Self.containsGoaway(bytes))
        }
    }

    static func containsGoaway(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset + 9 <= bytes.count {
            let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            if bytes[offset + 3] == 0x7 { return true }
            offset += 9 + length
        }
        return false
    }

    final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received: NIOLockedValueBox<[UInt8]>
        init(received: NIOLockedValueBox<[UInt8]>) { self.received = received }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            received.withLockedValue { $0 += buffer.readableBytesView }
        }
    }

    @Test("control bodies over 5,120 bytes are read whole")
    func largeControlBody() async throws {
        try await withMock { base, state in
            let client = try controlClient()
            defer { _ = client.shutdown() }
            let script =
                #"{"token":"\#(token64)","status":410,"reason":"Unregistered","timestamp":1700000000000,"note":"\#(String(repeating: "x", count: 8_000))"}"#
            var request = HTTPClientRequest(url: base + "/control/scripts")
            request.method = .POST
            request.body = .bytes(ByteBuffer(string: script))
            let response = try await client.execute(request, timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 20)
            #expect(response.status.code == 200, "\(String(buffer: body))")
            let sent = try await withSender(try makeSender(base, retry: RetryPolicy(maxAttempts: 1))) {
                await $0.send(push())
            }
            #expect(sent.status == 410)
            #expect(sent.timestamp == 1_700_000_000_000)
            _ = state
        }
    }

    @Test("control API: scripts listed and posted in the --scripts shape, DELETE received resets the count, behaviour")
    func controlAPI() async throws {
        try await withMock { base, state in
            let client = try controlClient()
            defer { _ = client.shutdown() }
            func call(_ method: HTTPMethod, _ path: String, _ body: String? = nil) async throws -> (Int, JSONValue) {
                var request = HTTPClientRequest(url: base + path)
                request.method = method
                if let body { request.body = .bytes(ByteBuffer(string: body)) }
                let response = try await client.execute(request, timeout: .seconds(10))
                let bytes = try await response.body.collect(upTo: 1 << 20)
                return (Int(response.status.code), try JSONParser.parse(Array(bytes.readableBytesView)))
            }
            let other = String(repeating: "ab", count: 32)
            // The --scripts file's shape: several tokens at once.
            let (posted, _) = try await call(
                .POST, "/control/scripts", #"{"\#(token64)":{"status":410},"\#(other)":{"status":429,"times":2}}"#)
            #expect(posted == 200)
            let (_, listed) = try await call(.GET, "/control/scripts")
            #expect(listed[token64]?["status"] == .int(410))
            #expect(listed[other]?["times"] == .int(2))
            // A bad entry changes nothing.
            let (refused, error) = try await call(.POST, "/control/scripts", #"{"\#(other)":{"status":999}}"#)
            #expect(refused == 400)
            #expect(error["error"]?.stringValue?.contains("status must be one of") == true)
            #expect(state.allScripts[other.lowercased()]?.times == 2)

            _ = try await withSender(try makeSender(base, retry: RetryPolicy(maxAttempts: 1))) { await $0.send(push()) }
            #expect(state.receivedCount == 1)
            let (_, cleared) = try await call(.DELETE, "/control/received")
            #expect(cleared["count"] == .int(0))
            let (_, received) = try await call(.GET, "/control/received")
            #expect(received["count"] == .int(0))
            #expect(received["pushes"] == .array([]))

            let (set, behaviour) = try await call(
                .POST, "/control/behaviour", #"{"goaway_after":5,"goaway_held_back":2}"#)
            #expect(set == 200)
            #expect(behaviour["goaway_after"] == .int(5))
            #expect(state.behaviour.goAwayHeldBack == 2)
            let (bad, problem) = try await call(
                .POST, "/control/behaviour", #"{"goaway_after":5,"goaway_held_back":5}"#)
            #expect(bad == 400)
            #expect(problem["error"]?.stringValue == "goaway_held_back must be less than goaway_after")
            let (unknown, typo) = try await call(.POST, "/control/behaviour", #"{"goaway_afer":5}"#)
            #expect(unknown == 400)
            #expect(typo["error"]?.stringValue?.contains("unknown behaviour 'goaway_afer'") == true)
            let (_, reset) = try await call(.DELETE, "/control/behaviour")
            #expect(reset["goaway_after"] == nil)
        }
    }
}

/// An HTTP client that trusts the mock's throwaway CA, for the control API.
private func controlClient() throws -> HTTPClient {
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(authority.caCertificatePEM.utf8)))
    return HTTPClient(
        eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: .init(tlsConfiguration: tls))
}
