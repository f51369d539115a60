import Foundation
import Hummingbird
import Synchronization
import TestSupport
import Testing

/// The real executable with ENRICH_OTLP_ENDPOINT set, against a local OTLP/HTTP receiver.
@Suite("Traces exported over OTLP/HTTP by the real server")
struct TracingExportTests {
    @Test(
        "the server posts its spans to <endpoint>/v1/traces as protobuf, and its request log lines carry the trace id")
    func export() async throws {
        let received = Mutex<[(contentType: String, body: [UInt8])]>([])
        let router = Router()
        router.post("/v1/traces") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 22)
            received.withLock { $0.append((request.headers[.contentType] ?? "", Array(body.readableBytesView))) }
            return Response(status: .ok)
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let receiver = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await receiver.runService() }
            var iterator = ports.makeAsyncIterator()
            let receiverPort = try #require(await iterator.next())
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("otlp-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let log = directory.appendingPathComponent("server.log")
            FileManager.default.createFile(atPath: log.path, contents: nil)
            let process = Process()
            process.executableURL = try ServerProcess.executableURL()
            process.arguments = [
                "serve", "--port", "0", "--db", directory.appendingPathComponent("db.sqlite").path, "--log-level",
                "debug",
            ]
            process.environment = ProcessInfo.processInfo.environment.merging([
                "ENRICH_OTLP_ENDPOINT": "http://127.0.0.1:\(receiverPort)"
            ]) { _, new in new }
            process.standardError = try FileHandle(forWritingTo: log)
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            defer {
                if process.isRunning { process.terminate() }
                process.waitUntilExit()
            }
            var port: Int?
            for _ in 0..<600 where port == nil {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                if let range = text.range(of: #"address=http://127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                    port = Int(text[range].split(separator: ":").last!)
                } else {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            let client = ServiceClient(base: "http://127.0.0.1:\(try #require(port, "the server did not start"))")
            let now = Int(Date().timeIntervalSince1970)
            let reported = try await client.post(
                "/v1/devices/traced/locations",
                json: #"{"locations":[{"latitude":48.85,"longitude":2.35,"utc_timestamp":\#(now)}]}"#)
            #expect(reported.status == 200)
            // A store search's key rides in the query: the span keeps the path, never the key.
            let canary = "canary-query-key-7Hq2"
            _ = try await client.get("/stores/search/?lat=48.85&lng=2.35&private_key=\(canary)")
            // The batch exporter sends within its schedule (5 s); a graceful stop flushes what is left.
            process.terminate()
            process.waitUntilExit()
            let exports = received.withLock { $0 }
            #expect(!exports.isEmpty, "no export reached the receiver")
            #expect(exports.allSatisfy { $0.contentType == "application/x-protobuf" && !$0.body.isEmpty })
            let exported = exports.flatMap(\.body)
            #expect(exported.contains(subsequence: Array("/stores/search/".utf8)), "the search's span was exported")
            #expect(!exported.contains(subsequence: Array(canary.utf8)), "a query key reached the collector")
            let logText = try String(contentsOf: log, encoding: .utf8)
            #expect(!logText.contains(canary), "a query key reached the log")
            let lines = logText.split(separator: "\n")
            #expect(
                lines.contains { $0.contains("/v1/devices/traced/locations") && $0.contains("trace_id=") },
                "no request log line with a trace id")
            group.cancelAll()
        }
    }
}

extension Array where Element == UInt8 {
    /// True when `needle` occurs in these bytes.
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        return (0...(count - needle.count)).contains { start in
            self[start..<(start + needle.count)].elementsEqual(needle)
        }
    }
}
