import ArgumentParser
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import TestSupport
import Testing

@testable import enrichment_server

/// One audience example of a doc: the body sent to `POST /v1/audiences/preview` and the answer the doc shows.
struct DocExample: CustomStringConvertible {
    var file: String
    var line: Int
    var body: String
    var count: Int64
    var sample: [String]

    var description: String { "\(file):\(line) \(body)" }

    /// The examples of a doc: a line that starts with `{"audience"` (the README) or `-d '{"audience"` (AUDIENCES.md),
    /// continued over the next lines until its braces close, then a comment line `# -> {…}` or `# {…}` with the
    /// answer (its `count` and `sample`; anything after the object is explanation).
    static func parse(_ text: String, file: String) throws -> [DocExample] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var examples: [DocExample] = []
        var index = 0
        while index < lines.count {
            let start = index
            var line = lines[index]
            index += 1
            if line.hasPrefix("-d '{\"audience\"") {
                line.removeFirst(4)
            } else if !line.hasPrefix("{\"audience\"") {
                continue
            }
            var body = line
            while depth(body) > 0, index < lines.count {
                body += "\n" + lines[index]
                index += 1
            }
            if body.hasSuffix("'") { body.removeLast() }
            guard index < lines.count, lines[index].hasPrefix("#") else {
                throw DocParseError("\(file):\(start + 1): an audience example without an answer line under it")
            }
            let comment = lines[index].drop { $0 != "{" }
            let answer = try JSONValue.decode(Data(balancedObject(String(comment)).utf8))
            guard case .int(let count)? = answer["count"], case .array(let sample)? = answer["sample"] else {
                throw DocParseError("\(file):\(index + 1): the answer has no count and sample")
            }
            examples.append(
                DocExample(
                    file: file, line: start + 1, body: body, count: count, sample: sample.compactMap(\.stringValue)))
        }
        return examples
    }

    /// How many braces are open at the end of `text` (the examples hold no braces inside strings).
    static func depth(_ text: String) -> Int { text.reduce(0) { $0 + ($1 == "{" ? 1 : $1 == "}" ? -1 : 0) } }

    /// The JSON object at the start of `text`, up to the brace that closes it.
    static func balancedObject(_ text: String) -> String {
        var open = 0
        for (offset, character) in text.enumerated() {
            if character == "{" { open += 1 }
            if character == "}" { open -= 1 }
            if open == 0 { return String(text.prefix(offset + 1)) }
        }
        return text
    }
}

struct DocParseError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `enrichment-server demo` as a user starts it, on port 0 and a temporary database.
struct DemoProcess {
    let process: Process
    let port: Int
    var client: ServiceClient { ServiceClient(base: "http://127.0.0.1:\(port)") }

    /// Starts the demo and waits for its "demo ready" log line (the data is seeded then).
    static func start(database: String) throws -> DemoProcess {
        let process = Process()
        process.executableURL = try ServerProcess.executableURL()
        process.arguments = ["demo", "--port", "0", "--db", database, "--log-level", "notice"]
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var seen = ""
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let chunk = stderr.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
            // The log line: `… notice enrichment-server: address=http://127.0.0.1:PORT … demo ready`.
            guard let ready = seen.range(of: "demo ready") else { continue }
            let line = seen[..<ready.upperBound].split(separator: "\n").last ?? ""
            if let address = line.range(of: #"http://127\.0\.0\.1:(\d+)"#, options: .regularExpression),
                let port = Int(line[address].split(separator: ":").last!)
            {
                return DemoProcess(process: process, port: port)
            }
        }
        process.terminate()
        throw DocParseError("the demo did not say it was ready: \(seen)")
    }

    /// SIGTERM (graceful shutdown); returns once the process has exited.
    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

@Suite("enrichment-server demo: the docs' audience examples answer what they show")
struct DemoTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The README's audience examples, then docs/AUDIENCES.md's "Example of each kind".
    static func examples() throws -> (readme: [DocExample], audiences: [DocExample]) {
        func read(_ path: String) throws -> String {
            try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        }
        return (
            try DocExample.parse(try read("README.md"), file: "README.md"),
            try DocExample.parse(try read("docs/AUDIENCES.md"), file: "docs/AUDIENCES.md")
        )
    }

    /// Each example's answer from the running demo, as (count, sample) beside what the doc shows.
    static func check(_ examples: [DocExample], against client: ServiceClient) async throws -> [String] {
        var answers: [String] = []
        for example in examples {
            let reply = try await client.post("/v1/audiences/preview", json: example.body)
            #expect(reply.status == 200, "\(example): \(reply.text)")
            let sample =
                (reply.json?["sample"].flatMap { value -> [String]? in
                    guard case .array(let items) = value else { return nil }
                    return items.compactMap(\.stringValue)
                }) ?? []
            #expect(reply.json?["count"] == .int(example.count), "\(example): \(reply.text)")
            #expect(sample == example.sample, "\(example): \(reply.text)")
            answers.append("\(reply.json?["count"].map { "\($0)" } ?? "-") \(sample)")
        }
        return answers
    }

    static func temporaryDatabase(_ name: String) -> (directory: URL, path: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
        return (directory, directory.appendingPathComponent("demo.sqlite").path)
    }

    @Test("the docs hold the six README examples and AUDIENCES.md's ten, each with an answer")
    func docsHoldTheExamples() throws {
        let (readme, audiences) = try Self.examples()
        #expect(readme.count == 6)
        #expect(audiences.count == 10)
        #expect(readme.allSatisfy { !$0.sample.isEmpty && $0.count == Int64($0.sample.count) })
    }

    @Test("on a fresh demo database every README and AUDIENCES.md audience example answers what the doc shows")
    func freshStart() async throws {
        let (readme, audiences) = try Self.examples()
        let (directory, database) = Self.temporaryDatabase("demo-fresh")
        defer { try? FileManager.default.removeItem(at: directory) }
        let demo = try DemoProcess.start(database: database)
        defer { demo.stop() }
        _ = try await Self.check(readme + audiences, against: demo.client)
        // The README's quick start works on the demo too: no demo device is within 500 m of its point.
        let now = Int(Date().timeIntervalSince1970)
        let reported = try await demo.client.post(
            "/v1/devices/phone-1/locations",
            json: #"{"locations":[{"latitude":48.8566,"longitude":2.3522,"utc_timestamp":\#(now)}]}"#)
        #expect(reported.status == 200)
        let near = try await demo.client.post(
            "/v1/audiences/preview",
            json: #"{"audience":{"near":{"latitude":48.8566,"longitude":2.3522,"radius_m":500}}}"#)
        #expect(near.json?["count"] == .int(1), "\(near.text)")
        #expect(near.json?["sample"] == .array([.string("phone-1")]), "\(near.text)")
    }

    @Test("a second start on the same demo database answers the same, with the same visits and refreshed fixes")
    func secondStart() async throws {
        let (readme, audiences) = try Self.examples()
        let (directory, database) = Self.temporaryDatabase("demo-again")
        defer { try? FileManager.default.removeItem(at: directory) }

        func snapshot(_ client: ServiceClient) async throws -> (visits: [String: Int], zones: [String: Int], fix: Int64)
        {
            var visits: [String: Int] = [:]
            var zones: [String: Int] = [:]
            for device in ["d1", "d2", "d3"] {
                if case .array(let items)? = try await client.get("/v1/devices/\(device)/visits").json?["visits"] {
                    visits[device] = items.count
                }
                if case .array(let items)? = try await client.get("/v1/devices/\(device)/zois").json?["zois"] {
                    zones[device] = items.count
                }
            }
            let fix = try await client.get("/v1/devices/d7/location").json?["utc_timestamp"]
            guard case .int(let time)? = fix else { throw DocParseError("no fix for d7: \(String(describing: fix))") }
            return (visits, zones, time)
        }

        let first = try DemoProcess.start(database: database)
        let firstAnswers = try await Self.check(readme + audiences, against: first.client)
        let before = try await snapshot(first.client)
        first.stop()
        #expect(before.visits.count == 3 && before.visits.values.allSatisfy { $0 > 60 }, "\(before.visits)")

        // A second later at least, so that a refreshed fix has a later time.
        try await Task.sleep(for: .seconds(1.1))
        let restarted = Int64(Date().timeIntervalSince1970)
        let second = try DemoProcess.start(database: database)
        defer { second.stop() }
        let secondAnswers = try await Self.check(readme + audiences, against: second.client)
        let after = try await snapshot(second.client)
        #expect(secondAnswers == firstAnswers)
        #expect(after.visits == before.visits, "seeding again must not add visits")
        #expect(after.zones == before.zones)
        #expect(after.fix > before.fix && after.fix >= restarted - 60 - 1, "d7's fix is reported anew at each start")
        let regions = try await second.client.get("/v1/regions").json?["regions"]
        guard case .array(let list)? = regions else {
            Issue.record("no regions: \(String(describing: regions))")
            return
        }
        #expect(list.filter { $0["id"]?.stringValue?.hasSuffix("depot") == true }.count == 1)
    }
}

@Suite("enrichment-server demo: arguments")
struct DemoArgumentsTests {
    @Test("the demo's database defaults to data/demo.sqlite, ENRICH_DB and ENRICH_DATABASE_URL are not read")
    func ownDatabase() throws {
        let command = try #require(try EnrichmentServerCommand.parseAsRoot(["demo"]) as? Demo)
        let configuration = try command.configuration(environment: [
            "ENRICH_DB": "mine.sqlite", "ENRICH_DATABASE_URL": "postgres://u:p@localhost/db", "ENRICH_PORT": "9001",
        ])
        #expect(configuration.databasePath == "data/demo.sqlite")
        #expect(configuration.databaseURL == nil)
        #expect(configuration.port == 9001)
        #expect(configuration.loadSamplePOIs)
        let flags = try #require(
            try EnrichmentServerCommand.parseAsRoot(["demo", "--db", "x.sqlite", "--port", "0", "--mode", "woosmap"])
                as? Demo)
        let set = try flags.configuration(environment: [:])
        #expect(set.databasePath == "x.sqlite" && set.port == 0 && set.mode == .woosmap)
    }

    @Test("the demo refuses the service's own database: serve's default, ENRICH_DB, or a link to it")
    func refusesServiceDatabase() throws {
        // Written another way, still serve's default file.
        var message = ""
        do { _ = try EnrichmentServerCommand.parseAsRoot(["demo", "--db", "./data/../data/enrichment.sqlite"]) } catch {
            message = EnrichmentServerCommand.message(for: error)
        }
        #expect(message.contains("is the service's database (serve's default)"), "\(message)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("demo-db-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let real = directory.appendingPathComponent("prod.sqlite").path
        let link = directory.appendingPathComponent("link.sqlite").path
        #expect(FileManager.default.createFile(atPath: real, contents: Data()))
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        for path in [real, link] {
            let command = try #require(try EnrichmentServerCommand.parseAsRoot(["demo", "--db", path]) as? Demo)
            #expect(throws: ValidationError.self) { try command.configuration(environment: ["ENRICH_DB": real]) }
            #expect(try command.configuration(environment: [:]).databasePath == path)
        }
    }

    @Test("demo --help explains what it seeds, where, and that it can be started again")
    func help() {
        // Read with its line breaks as spaces: the help is wrapped to the terminal's width.
        let help = EnrichmentServerCommand.helpMessage(for: Demo.self).split(whereSeparator: \.isWhitespace)
            .joined(separator: " ")
        for phrase in [
            "data/demo.sqlite", "d1 to", "depot", "three weeks of visits", "never duplicates", "--db", "--port",
        ] {
            #expect(help.contains(phrase), "\(phrase) missing from: \(help)")
        }
        let root = EnrichmentServerCommand.helpMessage()
        #expect(root.contains("demo"))
    }
}
