import Essentials
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A graceful shutdown (SIGTERM) that comes while an enrichment's body is still arriving: the event loop's handler
/// (`EnrichOnEventLoop`) holds the shutdown's notice until the request is answered, so the connection, which
/// Hummingbird would otherwise take for idle and close, gets its answer first.
@Suite("Graceful shutdown during an enrichment answered on the event loop")
struct EnrichShutdownTests {
    @Test("SIGTERM while an enrichment's body arrives: it is answered, then the connection closes and the server exits")
    func answeredThenClosed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("quiesce-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let server = try ServerProcess.start(database: directory.appendingPathComponent("db.sqlite").path)
        defer { if server.process.isRunning { server.kill9() } }
        let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
        let now = Int64(Date().timeIntervalSince1970)
        let fix = #"{"locations":[{"latitude":43.6047,"longitude":3.8805,"utc_timestamp":\#(now - 30)}]}"#
        #expect(try await client.post("/v1/devices/phone/locations", json: fix).status == 200)
        let body =
            #"{"device_id":"phone","payload":{"aps":{"alert":{"title":"Hi","body":"x"},"mutable-content":1,"#
            + #""category":"location","timestamp":\#(now)}}}"#
        // Answered from memory (the fix posted is in the cache). No POIs are loaded: the outcome is whatever the
        // route answers without places, the same each time.
        let first = try await client.post("/v1/enrich", json: body)
        #expect(first.status == 200)
        let outcome = try #require(first.json?["outcome"])
        #expect(try await client.post("/v1/enrich", json: body).json?["outcome"] == outcome)
        let metrics = try await client.get("/metrics").text
        #expect(
            metrics.split(separator: "\n").contains("enrichment_event_loop_answers_total 2"),
            "the enrichments were not answered on the event loop")

        let request = Array(
            ("POST /v1/enrich HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                + "\(body.utf8.count)\r\n\r\n\(body)").utf8)
        let half = request.count - body.utf8.count / 2
        let pid = server.process.processIdentifier
        let (answer, closed): ((head: String, body: [UInt8])?, Bool) = try await blocking {
            let connection = try RawConnection(port: server.port, readTimeout: 10)
            connection.send(request[..<half])
            usleep(200_000)
            kill(pid, SIGTERM)
            // The rest is sent once the shutdown is under way: the server no longer takes connections.
            var refused = false
            for _ in 0..<100 where !refused {
                usleep(50_000)
                refused = (try? RawConnection(port: server.port, readTimeout: 1)) == nil
            }
            guard refused else { return (nil, false) }
            connection.send(request[half...])
            let answer = connection.readResponse()
            return (answer, connection.readUntilClosed().closed)
        }
        #expect(answer?.head.hasPrefix("HTTP/1.1 200") == true, "\(answer?.head ?? "no answer")")
        #expect(try JSONValue.decode(Data(answer?.body ?? []))["outcome"] == outcome)
        #expect(closed, "the connection was left open after the shutdown's answer")
        let deadline = Date().addingTimeInterval(15)
        while server.process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!server.process.isRunning, "the server did not exit after its last connection was answered")
        if !server.process.isRunning { #expect(server.process.terminationStatus == 0) }
    }
}
