import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import TestSupport
import Testing

@testable import EnrichmentService

/// `POST /v1/enrich` answered on the event loop (`EnrichOnEventLoop`) must be the router's answer: the same status,
/// body and headers, the same metrics, in the same order on a connection.
@Suite("Enrichment answered on the event loop")
struct EnrichOnEventLoopTests {
    static let now: Int64 = 1_767_225_600
    static let clock = FixedWallClock(epochSeconds: Double(now))

    /// The event loop's answers counted so far (`enrichment_event_loop_answers_total`).
    static func answered(_ client: ServiceClient) async throws -> Int {
        let text = try await client.get("/metrics").text
        for line in text.split(separator: "\n") where line.hasPrefix("enrichment_event_loop_answers_total ") {
            return Int(Double(line.split(separator: " ").last!)!)
        }
        return 0
    }

    static let admin = ["Authorization": "Bearer admin-key-0123456789"]

    /// What both services are sent before the requests compared: fixes for two devices and one enrichment each,
    /// so that their fixes and contexts are in memory.
    static func prepare(_ client: ServiceClient) async throws {
        for device in ["phone", "tablet"] {
            let posted = try await client.post(
                "/v1/devices/\(device)/locations",
                json: #"{"locations":[{"latitude":43.6047,"longitude":3.8805,"utc_timestamp":\#(now - 30)}]}"#,
                headers: admin)
            #expect(posted.status == 200, "\(posted.text)")
            let enriched = try await client.post(
                "/v1/enrich", json: enrichBody(device: device, payload: locationPayload(timestamp: "\(now)")),
                headers: admin)
            #expect(enriched.json?["outcome"] == .string("enriched"), "\(enriched.text)")
        }
    }

    /// The requests compared: each kind of answer the route gives (enriched, stale, no timestamp, the woosmap
    /// mode, a request's own fix and window, an unknown device, refusals of every kind). Apps' own keys and
    /// enrichment settings are `AppEnrichmentTests`' and `AppScopeTests`', which run with the answering on.
    static let requests: [(body: String, headers: [String: String])] = {
        let fresh = locationPayload(timestamp: "\(now)")
        return [
            (enrichBody(device: "phone", payload: fresh), admin),
            (enrichBody(device: "phone", payload: fresh, at: now + 300), admin),
            (enrichBody(device: "phone", payload: fresh, at: now + 301), admin),
            (enrichBody(device: "phone", payload: fresh, mode: "woosmap"), admin),
            (enrichBody(device: "phone", payload: locationPayload(timestamp: "\"\(now)\"")), admin),
            (enrichBody(device: "phone", payload: #"{"aps":{"alert":"hi","mutable-content":1}}"#), admin),
            (enrichBody(device: "phone", payload: locationPayload(timestamp: "\(now)", category: "news")), admin),
            (
                #"{"device_id":"phone","payload":\#(fresh),"window":10,"max_future_skew":null,"#
                    + #""fix":{"latitude":48.8566,"longitude":2.3522,"horizontal_accuracy":12}}"#, admin
            ),
            (enrichBody(device: "nobody", payload: fresh), admin),
            (enrichBody(device: "tablet", payload: fresh), admin.merging(["Enrich-App": "default"]) { a, _ in a }),
            (enrichBody(device: "phone", payload: fresh), ["Authorization": "Bearer wrong-key"]),
            (enrichBody(device: "phone", payload: fresh), [:]),
            (enrichBody(device: "phone", payload: fresh), admin.merging(["Enrich-App": "nowhere"]) { a, _ in a }),
            (#"{"device_id":"phone","payload":\#(fresh),"colour":"red"}"#, admin),
            (#"{"device_id":"phone","payload":\#(fresh),"device_id":"other"}"#, admin),
            (#"{"device_id":"","payload":\#(fresh)}"#, admin),
            (#"{"device_id":"phone","payload":\#(fresh),"at":"soon"}"#, admin),
            (#"{"device_id":"phone","payload":\#(fresh)"#, admin),
            (#"[1,2]"#, admin),
            // Content-Type twice (the client sends its own and this one): read as one list, not JSON, 415.
            (
                enrichBody(device: "phone", payload: fresh),
                admin.merging(["Content-Type": "application/json"]) { a, _ in a }
            ),
        ]
    }()

    static func configure(_ configuration: inout ServiceConfiguration, onEventLoop: Bool) {
        configuration.apiKey = Secret("admin-key-0123456789")
        configuration.enrichOnEventLoop = onEventLoop
        configuration.mapKey = "MAPKEY"
    }

    @Test(
        "every request is answered as the router answers it: status, body and headers; the ones it can are answered on the event loop"
    )
    func sameAnswers() async throws {
        let router = try await withService({ Self.configure(&$0, onEventLoop: false) }, clock: Self.clock) { client in
            try await Self.prepare(client)
            var replies: [ServiceClient.Reply] = []
            for request in Self.requests {
                replies.append(try await client.post("/v1/enrich", json: request.body, headers: request.headers))
            }
            #expect(try await Self.answered(client) == 0)
            return replies
        }
        try await withService({ Self.configure(&$0, onEventLoop: true) }, clock: Self.clock) { client in
            try await Self.prepare(client)
            var onLoop = 0
            for (index, request) in Self.requests.enumerated() {
                let before = try await Self.answered(client)
                let reply = try await client.post("/v1/enrich", json: request.body, headers: request.headers)
                let expected = router[index]
                #expect(reply.status == expected.status, "request \(index): \(reply.text)")
                #expect(Self.comparable(reply) == Self.comparable(expected), "request \(index)")
                #expect(Set(reply.headers.keys) == Set(expected.headers.keys), "request \(index): \(reply.headers)")
                // The date is this second's, the length this body's (`places_ms` is written with its own digits).
                for (name, value) in expected.headers where name != "date" && name != "content-length" {
                    #expect(reply.headers[name] == value, "request \(index): header \(name)")
                }
                #expect(reply.headers["content-length"] == String(reply.body.count))
                #expect(Self.isIMFFixdate(reply.headers["date"]), "\(reply.headers["date"] ?? "no date")")
                let after = try await Self.answered(client)
                if after > before { onLoop += 1 }
            }
            // The enrichments of known devices (the first eight and the tenth) are answered from memory; an
            // unknown device and every refusal went to the router.
            #expect(onLoop == 9)
        }
    }

    /// The body without `places_ms` (a time measured for each request), which must be a number on both.
    static func comparable(_ reply: ServiceClient.Reply) -> JSONValue? {
        guard case .object(var members)? = reply.json else { return reply.json }
        if let time = members.removeValue(forKey: "places_ms") {
            switch time {
            case .double, .int: break
            default: return .string("places_ms is not a number: \(time)")
            }
        }
        return .object(members)
    }

    static func isIMFFixdate(_ value: String?) -> Bool {
        guard let value else { return false }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: value) else { return false }
        return formatter.string(from: date) == value && abs(date.timeIntervalSinceNow) < 60
    }

    @Test(
        "an answer's head is what the route's response becomes through the codec: the encoder writes the same bytes",
        arguments: [nil, "enrichment-service/1.0", "two\nlines "]
    )
    func wireBytes(serverName: String?) throws {
        let json = Array(#"{"outcome":"enriched","body":"é \"q\""}"#.utf8)
        let date = HTTPDateCache.format(epochSeconds: 1_767_225_600)
        /// The bytes a channel's outbound handlers write for `parts`.
        func encoded(_ handlers: [any ChannelHandler], _ parts: [NIOAny]) throws -> [UInt8] {
            let channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandlers(handlers)
            for part in parts { channel.write(part, promise: nil) }
            channel.flush()
            var bytes: [UInt8] = []
            while let part = try channel.readOutbound(as: IOData.self) {
                guard case .byteBuffer(let buffer) = part else {
                    Issue.record("a file region")
                    continue
                }
                bytes += buffer.readableBytesView
            }
            _ = try channel.finish()
            return bytes
        }
        // The route's response, through the codec and the encoder of the service's pipeline.
        var head = HTTPResponse(status: .ok)
        head.headerFields[.contentType] = "application/json; charset=utf-8"
        head.headerFields[.contentLength] = String(json.count)
        head.headerFields[.date] = date
        if let serverName { head.headerFields[.server] = serverName }
        let route = try encoded(
            [HTTPResponseEncoder(), HTTP1ToHTTPServerCodec(secure: false)],
            [
                NIOAny(HTTPResponsePart.head(head)), NIOAny(HTTPResponsePart.body(ByteBuffer(bytes: json))),
                NIOAny(HTTPResponsePart.end(nil)),
            ])
        // The answer made on the event loop, written below the codec.
        let wire = EnrichAnswerWire(serverName: serverName).head(length: json.count, date: date)
        let answer = try encoded(
            [HTTPResponseEncoder()],
            [
                NIOAny(HTTPServerResponsePart.head(wire)),
                NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: json)))),
                NIOAny(HTTPServerResponsePart.end(nil)),
            ])
        // Compared as text (both are valid UTF-8, so equal text is equal bytes).
        #expect(String(decoding: answer, as: UTF8.self) == String(decoding: route, as: UTF8.self))
        #expect(route.count > json.count + 80)
    }

    @Test("a HEAD behind an answer made here is framed without a body, and the request after it gets its own answer")
    func headAfterAnswer() async throws {
        try await withService({ $0.enrichOnEventLoop = true }, clock: Self.clock) { client in
            try await Self.warm(client)
            let before = try await Self.answered(client)
            let port = Self.port(client)
            // The encoder frames each response by its request's method, in order: an answer that bypassed it would
            // leave the POST's turn to the HEAD's answer, which would then carry a body.
            let stream =
                Self.rawPost("/v1/enrich", Self.enrich) + "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            let received = try await blocking {
                let connection = try RawConnection(port: port)
                connection.send(stream)
                return connection.readUntilClosed().bytes
            }
            var rest = received[...]
            /// The next response's head, and its body when it has one.
            func next(body: Bool) -> (head: String, body: ArraySlice<UInt8>)? {
                guard let end = rest.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
                let head = String(decoding: rest[..<end.lowerBound], as: UTF8.self)
                let content = body ? rest[end.upperBound...].prefix(RawConnection.contentLength(head)) : []
                rest = rest[(end.upperBound + content.count)...]
                return (head, content)
            }
            let enriched = next(body: true)
            let head = next(body: false)
            let health = next(body: true)
            #expect(enriched?.head.hasPrefix("HTTP/1.1 200") == true)
            #expect(try JSONValue.decode(Data(enriched?.body ?? []))["outcome"] == .string("enriched"))
            #expect(head?.head.hasPrefix("HTTP/1.1 ") == true, "\(head?.head ?? "none")")
            #expect(health?.head.hasPrefix("HTTP/1.1 200") == true, "\(health?.head ?? "none")")
            #expect((try? JSONValue.decode(Data(health?.body ?? []))) != nil, "the health answer is JSON")
            #expect(rest.isEmpty, "\(rest.count) bytes after the last answer")
            #expect(try await Self.answered(client) == before + 1)
        }
    }

    @Test("the Date header is RFC 9110's IMF-fixdate, day and month names in English, fields zero-padded")
    func dates() {
        #expect(HTTPDateCache.format(epochSeconds: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDateCache.format(epochSeconds: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDateCache.format(epochSeconds: 253_402_300_799) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDateCache.format(epochSeconds: 1_709_164_800) == "Thu, 29 Feb 2024 00:00:00 GMT")
    }

    /// The raw-socket tests' device: a fix for "phone", and an enrichment of it.
    static let fix = #"{"locations":[{"latitude":43.6047,"longitude":3.8805,"utc_timestamp":\#(now - 30)}]}"#
    static let enrich = enrichBody(device: "phone", payload: locationPayload(timestamp: "\(now)"))

    /// Posts the fix and one enrichment, so that the device's fix and context are in memory.
    static func warm(_ client: ServiceClient) async throws {
        _ = try await client.post("/v1/devices/phone/locations", json: fix)
        #expect(try await client.post("/v1/enrich", json: enrich).status == 200)
    }

    static func port(_ client: ServiceClient) -> Int { Int(client.base.split(separator: ":").last!)! }

    /// A JSON POST as it goes on the wire, optionally closing the connection.
    static func rawPost(_ path: String, _ body: String, close: Bool = false) -> String {
        "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
            + "\(body.utf8.count)\r\n\(close ? "Connection: close\r\n" : "")\r\n\(body)"
    }

    @Test("pipelined requests are answered in order: one behind a request the router answers waits for it")
    func pipelinedOrder() async throws {
        try await withService({ $0.enrichOnEventLoop = true }, clock: Self.clock) { client in
            let (fix, enrich) = (Self.fix, Self.enrich)
            try await Self.warm(client)
            let before = try await Self.answered(client)
            let port = Self.port(client)
            // A fix report (the router, a database write), an enrichment, then the same again, in one write.
            let stream =
                Self.rawPost("/v1/devices/phone/locations", fix) + Self.rawPost("/v1/enrich", enrich)
                + Self.rawPost("/v1/devices/phone/locations", fix) + Self.rawPost("/v1/enrich", enrich, close: true)
            let received = try await blocking {
                let connection = try RawConnection(port: port)
                connection.send(stream)
                return connection.readUntilClosed().bytes
            }
            let bodies = RawConnection.bodies(received).map { try? JSONValue.decode(Data($0)) }
            #expect(bodies.count == 4)
            #expect(bodies.map { $0?["outcome"] == nil } == [true, false, true, false], "\(bodies)")
            #expect(bodies[1]?["outcome"] == .string("enriched"))
            // Each enrichment came behind a request the router answered: none of them on the event loop.
            #expect(try await Self.answered(client) == before)

            // Alone on a connection, and its body in three pieces, the same enrichment is answered on the event loop.
            let split = Self.rawPost("/v1/enrich", enrich)
            let pieces = [split.utf8.count / 3, 2 * split.utf8.count / 3]
            let single = try await blocking {
                let connection = try RawConnection(port: port)
                let bytes = Array(split.utf8)
                connection.send(bytes[..<pieces[0]])
                usleep(50_000)
                connection.send(bytes[pieces[0]..<pieces[1]])
                usleep(50_000)
                connection.send(bytes[pieces[1]...])
                return connection.readResponse()
            }
            #expect(single?.head.hasPrefix("HTTP/1.1 200") == true)
            #expect(try JSONValue.decode(Data(single?.body ?? []))["outcome"] == .string("enriched"))
            #expect(try await Self.answered(client) == before + 1)
        }
    }

    /// The `http_requests_total` of successful enrichments so far (the event loop's and the router's).
    static func enrichedRequests(_ client: ServiceClient) async throws -> Int {
        let text = try await client.get("/metrics").text
        return text.split(separator: "\n").filter {
            $0.hasPrefix("http_requests_total{") && $0.contains(#"route="/v1/enrich""#) && $0.contains(#"status="200""#)
        }.reduce(0) { $0 + Int(Double($1.split(separator: " ").last!)!) }
    }

    @Test("a client that sends and never reads holds the server's answers back; once it reads, it gets every one")
    func backpressure() async throws {
        try await withService({ $0.enrichOnEventLoop = true }, clock: Self.clock) { client in
            let enrich = Self.enrich
            try await Self.warm(client)
            let before = try await Self.enrichedRequests(client)
            let answeredBefore = try await Self.answered(client)
            let port = Self.port(client)
            // 4,000 enrichments in one stream (about 10 MB of answers, more than the socket buffers hold with the
            // client's receive buffer at 8 KiB), the last one closing the connection.
            let count = 4_000
            let stream =
                String(repeating: Self.rawPost("/v1/enrich", enrich), count: count - 1)
                + Self.rawPost("/v1/enrich", enrich, close: true)
            let connection = try RawConnection(port: port, readTimeout: 20, receiveBuffer: 8_192)
            let sending = Task { try await blocking { connection.send(stream) } }
            // The client reads nothing: the server answers what its buffers hold, then stops (the count unchanged
            // over four samples, 300 ms).
            var held = try await Self.enrichedRequests(client) - before
            var unchanged = 0
            for _ in 0..<100 where unchanged < 3 {
                try await Task.sleep(for: .milliseconds(100))
                let now = try await Self.enrichedRequests(client) - before
                unchanged = now == held && now > 0 ? unchanged + 1 : 0
                held = now
            }
            try await Task.sleep(for: .milliseconds(500))
            let stillHeld = try await Self.enrichedRequests(client) - before
            #expect(held > 0)
            #expect(held < count, "every answer was made while the client read none: nothing held them back")
            #expect(stillHeld == held, "answers went on being made while the client read none")
            // Some were answered on the event loop before the socket filled.
            #expect(try await Self.answered(client) > answeredBefore)

            // Once it reads, every answer arrives, in order, complete.
            let received = try await blocking { connection.readUntilClosed() }
            #expect(try await sending.value)
            #expect(received.closed)
            let bodies = RawConnection.bodies(received.bytes)
            #expect(bodies.count == count)
            let enriched = bodies.filter {
                (try? JSONValue.decode(Data($0)))?["outcome"] == .string("enriched")
            }
            #expect(enriched.count == count)
            #expect(try await Self.enrichedRequests(client) - before == count)
        }
    }
}
