import AsyncHTTPClient
import EnrichmentCore
import EnrichmentRuntime
import EnrichmentService
import Essentials
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// Inputs that once stopped the process or escaped the error shape: each runs against the real server, and the
/// server must still answer `/health` afterwards.
@Suite("Service: hostile input (regressions from fuzzing)")
struct HardeningTests {
    static let now: Int64 = 1_800_000_000

    func expectAlive(_ client: ServiceClient) async throws {
        let health = try await client.get("/health")
        #expect(health.status == 200)
    }

    @Test(
        "'at' out of range is a 400 naming the field and the range; the server keeps answering",
        arguments: ["1e300", "-1e300", "1e19", "9223372036854775807", "-9223372036854775808", "253402300800", "-1"])
    func atOutOfRange(at: String) async throws {
        try await withService { client in
            let reply = try await client.post(
                "/v1/enrich", json: #"{"device_id":"d","payload":\#(locationPayload(timestamp: "1")),"at":\#(at)}"#)
            #expect(reply.status == 400)
            #expect(reply.errorReason == "invalid_request")
            #expect(reply.json?["error"]?["field"] == .string("at"))
            #expect(reply.json?["error"]?["message"]?.stringValue?.contains("253402300799") == true)
            try await expectAlive(client)
        }
    }

    @Test("'at' at the edges of its range is accepted")
    func atEdges() async throws {
        try await withService { client in
            for at in ["0", "253402300799", "253402300799.5"] {
                let reply = try await client.post(
                    "/v1/enrich", json: #"{"device_id":"d","payload":\#(locationPayload(timestamp: "0")),"at":\#(at)}"#)
                #expect(reply.status == 200, "at=\(at)")
            }
        }
    }

    @Test(
        "64-bit extreme timestamps get exact verdicts instead of an overflow", arguments: [BodyMode.default, .woosmap])
    func extremeTimestamps(mode: BodyMode) async throws {
        try await withService({ $0.mode = mode }, clock: FixedWallClock(epochSeconds: Double(Self.now))) { client in
            let oldest = try await client.post(
                "/v1/enrich", json: enrichBody(device: "d", payload: locationPayload(timestamp: "-9223372036854775808"))
            )
            #expect(oldest.status == 200)
            #expect(oldest.json?["outcome"] == .string("stale"))
            #expect(oldest.json?["staleness"]?["rule"] == .string("older_than_window"))
            // now - Int64.min does not fit in 64 bits: the age is left out rather than wrapped.
            #expect(
                oldest.json?["staleness"]?["age_seconds"] == nil || oldest.json?["staleness"]?["age_seconds"] == .null)

            let newest = try await client.post(
                "/v1/enrich", json: enrichBody(device: "d", payload: locationPayload(timestamp: "9223372036854775807")))
            #expect(newest.status == 200)
            #expect(newest.json?["staleness"]?["rule"] == .string("future_accepted"))
            #expect(newest.json?["staleness"]?["age_seconds"] == .int(Self.now - Int64.max))
            try await expectAlive(client)
        }
    }

    @Test("a 64-bit future skew with a far-future timestamp is judged without overflow")
    func skewExtremes() async throws {
        let policy = StalenessPolicy(window: .max, maxFutureSkew: .max)
        let reading = TimestampReading(timestamp: .min, source: .apsInteger, problem: nil)
        #expect(policy.evaluate(reading, now: Date(timeIntervalSince1970: 1e300)).state == .stale)
        let future = TimestampReading(timestamp: .max, source: .apsInteger, problem: nil)
        #expect(
            StalenessPolicy(window: 300, maxFutureSkew: 0).evaluate(future, now: Date(timeIntervalSince1970: -1e300))
                .rule == .futureSkew)
    }

    @Test(
        "an upstream distance no place on Earth can have degrades the result",
        arguments: ["farther-than-earth", "negative"])
    func upstreamNonsense(mode: String) async throws {
        let fake = FakePlacesAPI()
        try await fake.run { base in
            try await withService(
                { configuration in
                    configuration.places = .woosmap
                    configuration.woosmapBaseURL = "\(base)/\(mode)"
                    configuration.woosmapKey = "K"
                    configuration.upstreamTimeout = 5
                    configuration.deadline = 10
                }, clock: FixedWallClock(epochSeconds: Double(Self.now))
            ) { client in
                _ = try await client.post(
                    "/v1/devices/p/locations",
                    json: #"{"locations":[{"latitude":43.6,"longitude":3.88,"utc_timestamp":\#(Self.now - 5)}]}"#)
                let reply = try await client.post(
                    "/v1/enrich", json: enrichBody(device: "p", payload: locationPayload(timestamp: "\(Self.now)")))
                #expect(reply.status == 200)
                #expect(reply.json?["outcome"] == .string("degraded"))
                #expect(reply.json?["degraded"]?["reason"] == .string("upstream_invalid_response"))
                #expect(reply.json?["degraded"]?["message"]?.stringValue?.contains("distance") == true)
                try await expectAlive(client)
            }
        }
    }

    @Test("invalid UTF-8 in a JSON body is invalid_json with the byte offset")
    func invalidUTF8() async throws {
        try await withService { client in
            var body = Array(#"{"device_id":"d","payload":{"aps":{"alert":"ab"#.utf8)
            let offset = body.count
            body += [0xC3, 0x28] + Array(#""}}}"#.utf8)
            let reply = try await client.request(.POST, "/v1/enrich", body: Data(body))
            #expect(reply.status == 400)
            #expect(reply.errorReason == "invalid_json")
            #expect(reply.json?["error"]?["byte_offset"] == .int(Int64(offset)))
            let surrogate = try await client.post("/v1/enrich", json: #"{"device_id":"\ud800"}"#)
            #expect(surrogate.status == 400)
            #expect(surrogate.errorReason == "invalid_json")
        }
    }

    @Test("a chunked body over the limit is 413 like one with a Content-Length")
    func chunkedTooLarge() async throws {
        try await withService({ $0.maxBodyBytes = 4096 }) { client in
            var request = HTTPClientRequest(url: client.base + "/v1/enrich")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            let chunk = ByteBuffer(repeating: UInt8(ascii: " "), count: 1024)
            request.body = .stream(
                AsyncStream { continuation in
                    for _ in 0..<64 { continuation.yield(chunk) }
                    continuation.finish()
                }, length: .unknown)
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            #expect(response.status.code == 413)
            let json = try JSONValue.decode(Data(body.readableBytesView))
            #expect(json["error"]?["reason"] == .string("body_too_large"))
            try await expectAlive(client)
        }
    }

    @Test("a method a path does not take is 405 with Allow; HEAD works where GET does")
    func methodNotAllowed() async throws {
        try await withService { client in
            let trace = try await client.request(.TRACE, "/v1/enrich")
            #expect(trace.status == 405)
            #expect(trace.headers["allow"] == "POST")
            #expect(trace.errorReason == "method_not_allowed")
            let put = try await client.request(.PUT, "/health")
            #expect(put.status == 405)
            #expect(put.headers["allow"] == "GET, HEAD")
            let device = try await client.request(.PATCH, "/v1/devices/abc")
            #expect(device.headers["allow"] == "DELETE")
            let head = try await client.request(.HEAD, "/health")
            #expect(head.status == 200)
            let unknown = try await client.request(.TRACE, "/nowhere")
            #expect(unknown.status == 404)
        }
    }

    @Test("headers over the limit get 431 in the JSON error shape; bad syntax gets 400 in it")
    func malformedRequests() async throws {
        try await withService { client in
            let port = Int(client.base.split(separator: ":").last!)!
            let (head, body) = try await blocking {
                let connection = try RawConnection(port: port)
                connection.send(
                    "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 100_000))\r\n\r\n")
                return connection.readResponse() ?? ("", [])
            }
            #expect(head.hasPrefix("HTTP/1.1 431"))
            #expect(try JSONValue.decode(Data(body))["error"]?["reason"] == .string("headers_too_large"))

            let (badHead, badBody) = try await blocking {
                let connection = try RawConnection(port: port)
                connection.send("GET /health HTTP/9\u{1}\r\n\r\n")
                return connection.readResponse() ?? ("", [])
            }
            #expect(badHead.hasPrefix("HTTP/1.1 400"))
            #expect(try JSONValue.decode(Data(badBody))["error"]?["reason"] == .string("malformed_request"))
            try await expectAlive(client)
        }
    }

    @Test("JSON endpoints refuse other content types with 415; no Content-Type is read as JSON")
    func contentType() async throws {
        try await withService { client in
            let text = try await client.request(.POST, "/v1/enrich", body: Data("{}".utf8), contentType: "text/plain")
            #expect(text.status == 415)
            #expect(text.errorReason == "unsupported_media_type")
            let form = try await client.request(
                .POST, "/v1/devices/d/locations", body: Data("{}".utf8),
                contentType: "application/x-www-form-urlencoded")
            #expect(form.status == 415)
            let charset = try await client.request(
                .POST, "/v1/devices/d/locations",
                body: Data(#"{"locations":[]}"#.utf8), contentType: "application/json; charset=utf-8")
            #expect(charset.status == 200)
        }
    }

    @Test("an empty API key is a start-up error, not 'no authentication'")
    func emptyAPIKey() async throws {
        var configuration = ServiceConfiguration()
        #expect(throws: ConfigurationError.self) { try configuration.apply(environment: ["ENRICH_API_KEY": ""]) }
        #expect(throws: ConfigurationError.self) { try configuration.apply(environment: ["ENRICH_API_KEY": "  "]) }
        configuration.apiKey = ""
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        var other = ServiceConfiguration()
        do throws(ConfigurationError) {
            try other.apply(environment: ["ENRICH_MAP_KEY": ""])
            Issue.record("an empty map key was accepted")
        } catch {
            #expect(error.description.contains("ENRICH_MAP_KEY"))
            #expect(error.description.contains("unset"))
        }
    }

    @Test("open paths stay open however the path is spelled; everything else needs the key")
    func openPathSpellings() async throws {
        try await withService({ $0.apiKey = "k" }) { client async throws in
            for path in ["/health", "/health/", "//health", "/metrics/"] {
                #expect(try await client.get(path).status == 200, "\(path)")
            }
            #expect(try await client.request(.DELETE, "/v1/devices/someone").status == 401)
            #expect(try await client.request(.DELETE, "//v1/devices/someone/").status == 401)
        }
    }

    @Test("percent-encoded device ids are decoded before they are checked")
    func percentEncodedDeviceID() async throws {
        try await withService { client in
            let stored = try await client.post(
                "/v1/devices/a%3Ab/locations",
                json: #"{"locations":[{"latitude":1,"longitude":2,"utc_timestamp":1700000000}]}"#)
            #expect(stored.status == 200)
            let read = try await client.get("/v1/devices/a:b/location")
            #expect(read.json?["device_id"] == .string("a:b"))
            let bad = try await client.get("/v1/devices/a%2Fb/location")
            #expect(bad.status == 400)
            #expect(bad.json?["error"]?["field"] == .string("deviceId"))
        }
    }
}

/// Connection deadlines and the connection cap, seen from raw sockets.
@Suite("Service: connection limits")
struct ConnectionLimitTests {
    static func port(_ client: ServiceClient) -> Int { Int(client.base.split(separator: ":").last!)! }

    @Test("an idle connection is closed after the idle timeout")
    func idle() async throws {
        try await withService({ $0.connections.idleTimeout = .milliseconds(300) }) { client in
            let port = Self.port(client)
            let (closed, elapsed) = try await blocking {
                let connection = try RawConnection(port: port, readTimeout: 5)
                let started = Date()
                return (connection.readUntilClosed().closed, Date().timeIntervalSince(started))
            }
            #expect(closed)
            #expect(elapsed < 3)
        }
    }

    @Test("a connection that answered a request is closed once idle, not before")
    func idleAfterResponse() async throws {
        try await withService({ $0.connections.idleTimeout = .milliseconds(500) }) { client in
            let port = Self.port(client)
            let (first, second, closed) = try await blocking {
                let connection = try RawConnection(port: port, readTimeout: 5)
                connection.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                let first = connection.readResponse()?.head ?? ""
                Thread.sleep(forTimeInterval: 0.2)
                connection.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                let second = connection.readResponse()?.head ?? ""
                return (first, second, connection.readUntilClosed().closed)
            }
            #expect(first.hasPrefix("HTTP/1.1 200"))
            #expect(second.hasPrefix("HTTP/1.1 200"))
            #expect(closed)
        }
    }

    @Test("a connection busy past its first idle deadline stays open, and closes an idle timeout after its last answer")
    func idleDeadlineMovesOn() async throws {
        // The deadline handler keeps one timer that fires at the first idle deadline and then sleeps until the
        // current one: it must neither close a connection that has been answering since, nor let it live on.
        try await withService({ $0.connections.idleTimeout = .milliseconds(1_500) }) { client in
            let port = Self.port(client)
            let (answers, closed, idle) = try await blocking {
                let connection = try RawConnection(port: port, readTimeout: 5)
                var answers: [String] = []
                for _ in 0..<5 {
                    connection.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                    answers.append(connection.readResponse()?.head ?? "")
                    Thread.sleep(forTimeInterval: 0.5)
                }
                let started = Date()
                connection.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                answers.append(connection.readResponse()?.head ?? "")
                return (answers, connection.readUntilClosed().closed, Date().timeIntervalSince(started))
            }
            #expect(answers.count == 6)
            #expect(answers.allSatisfy { $0.hasPrefix("HTTP/1.1 200") }, "\(answers)")
            #expect(closed)
            #expect(idle >= 1.3, "closed \(idle) s after the last request, before its idle timeout")
            #expect(idle < 5)
        }
    }

    @Test("trickled headers are cut off by the header timeout")
    func slowHeaders() async throws {
        try await withService({
            $0.connections.idleTimeout = .seconds(30)
            $0.connections.headerTimeout = .milliseconds(400)
        }) { client in
            let port = Self.port(client)
            let (closed, elapsed) = try await blocking {
                let connection = try RawConnection(port: port, readTimeout: 5)
                let started = Date()
                connection.send("GET /health HTTP/1.1\r\n")
                var open = true
                for _ in 0..<20 where open {
                    Thread.sleep(forTimeInterval: 0.1)
                    open = connection.send("X: y\r\n")
                }
                return (connection.readUntilClosed().closed, Date().timeIntervalSince(started))
            }
            #expect(closed)
            #expect(elapsed < 4)
        }
    }

    @Test("a body that never arrives is cut off by the body timeout")
    func slowBody() async throws {
        try await withService({
            $0.connections.idleTimeout = .seconds(30)
            $0.connections.bodyTimeout = .milliseconds(400)
        }) { client in
            let port = Self.port(client)
            let (closed, elapsed) = try await blocking {
                let connection = try RawConnection(port: port, readTimeout: 5)
                let started = Date()
                connection.send(
                    "POST /v1/enrich HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"dev"
                )
                return (connection.readUntilClosed().closed, Date().timeIntervalSince(started))
            }
            #expect(closed)
            #expect(elapsed < 4)
        }
    }

    @Test("at the connection cap a new client is served and the longest-idle connection is closed")
    func capEvictsIdle() async throws {
        try await withService({ $0.connections.maxConnections = 4 }) { client in
            let port = Self.port(client)
            let (health, oldestClosed, newestOpen) = try await blocking {
                var idle: [RawConnection] = []
                for _ in 0..<4 {
                    idle.append(try RawConnection(port: port, readTimeout: 2))
                    Thread.sleep(forTimeInterval: 0.05)
                }
                let fresh = try RawConnection(port: port, readTimeout: 5)
                fresh.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                let health = fresh.readResponse()?.head ?? ""
                let oldestClosed = idle[0].readUntilClosed().closed
                // The newest idle connection is still usable.
                idle[3].send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                let newestOpen = idle[3].readResponse()?.head.hasPrefix("HTTP/1.1 200") ?? false
                return (health, oldestClosed, newestOpen)
            }
            #expect(health.hasPrefix("HTTP/1.1 200"))
            #expect(oldestClosed)
            #expect(newestOpen)
        }
    }
}
