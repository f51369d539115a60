import EnrichmentCore
import Essentials
import Foundation
import TestSupport
import Testing

/// Runs the real `enrichment-server` executable, so process death is real.
struct ServerProcess {
    let process: Process
    let port: Int

    /// The executable built next to the test bundle by `swift test`.
    static func executableURL() throws -> URL {
        guard let url = builtExecutable(named: "enrichment-server") else {
            throw CocoaError(
                .fileNoSuchFile, userInfo: [NSFilePathErrorKey: "enrichment-server next to \(CommandLine.arguments[0])"]
            )
        }
        return url
    }

    /// Starts the server on port 0 with `database` and waits for its "listening" log line.
    static func start(database: String, environment: [String: String] = [:], logFile: URL? = nil) throws
        -> ServerProcess
    {
        let stderr = Pipe()
        let process = try launch(database: database, environment: environment, logFile: logFile, stderr: stderr)
        var seen = ""

        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if let logFile {
                seen = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                if seen.range(of: #"http://127\.0\.0\.1:(\d+)"#, options: .regularExpression) == nil {
                    Thread.sleep(forTimeInterval: 0.02)
                    continue
                }
            } else {
                let chunk = stderr.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen += String(decoding: chunk, as: UTF8.self)
            }
            if let range = seen.range(of: #"http://127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                let port = Int(seen[range].split(separator: ":").last!)!
                return ServerProcess(process: process, port: port)
            }
        }
        process.terminate()
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "server did not start: \(seen)"])
    }

    /// Starts the server on port 0 with `database` and returns at once (its log in `logFile`, else in `stderr`).
    static func launch(
        database: String, environment: [String: String] = [:], logFile: URL? = nil, stderr: Pipe = Pipe()
    ) throws -> Process {
        let process = Process()
        process.executableURL = try executableURL()
        process.arguments = [
            "serve", "--port", "0", "--db", database, "--sample-pois", "false", "--log-level", "notice",
        ]
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        if let logFile {
            // The whole log, for a test that reads what the operator is told.
            FileManager.default.createFile(atPath: logFile.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: logFile)
        } else {
            process.standardError = stderr
        }
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return process
    }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM (graceful shutdown); returns once the process has exited.
    func terminate() {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }
}

@Suite("Durability of acknowledged fixes")
struct DurabilityTests {
    @Test("fixes acknowledged with 200 survive kill -9 of the server")
    func survivesKill9() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kill9-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("db.sqlite").path
        let now = Int64(Date().timeIntervalSince1970)

        let first = try ServerProcess.start(database: database)
        let client = ServiceClient(base: "http://127.0.0.1:\(first.port)")
        var acknowledged = 0
        for batch in 0..<20 {
            let items = (0..<50).map { i in
                #"{"latitude":\#(Double(batch) / 10),"longitude":\#(Double(i) / 10),"utc_timestamp":\#(now - 10_000 + Int64(batch * 50 + i))}"#
            }
            let reply = try await client.post(
                "/v1/devices/durable/locations", json: #"{"locations":[\#(items.joined(separator: ","))]}"#)
            #expect(reply.status == 200)
            acknowledged += 50
        }
        first.kill9()

        let second = try ServerProcess.start(database: database)
        defer { second.kill9() }
        let reply = try await ServiceClient(base: "http://127.0.0.1:\(second.port)").get("/v1/devices/durable/location")
        #expect(reply.status == 200)
        // The newest acknowledged fix is the last one sent.
        #expect(reply.json?["utc_timestamp"] == .int(now - 10_000 + Int64(acknowledged - 1)))
        #expect(reply.json?["latitude"] == .double(1.9))
        #expect(reply.json?["longitude"] == .double(4.9))
    }
}
