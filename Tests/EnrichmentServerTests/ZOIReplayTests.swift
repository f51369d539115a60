import Essentials
import Foundation
import LocationCore
import TestSupport
import Testing

@Suite("enrichment-server zois and the visits API agree")
struct ZOIReplayTests {
    static let sample = repositoryRoot.appendingPathComponent("Tests/Fixtures/location/Visit_qualif.csv")

    @Test("Visit_qualif.csv replayed by the CLI and POSTed to a running server gives the same ZOIs")
    func cliAndHTTPAgree() async throws {
        let cli = try ImportCommandTests.run(["zois", "--visits", Self.sample.path, "--json"])
        #expect(cli.status == 0, "\(cli.err)")
        // Nothing but the document on stdout.
        let fromCLI = try JSONValue.decode(Data(cli.out.utf8))
        guard case .array(let cliZOIs)? = fromCLI["zois"] else {
            Issue.record("no zois in \(cli.out.prefix(200))")
            return
        }
        #expect(cliZOIs.count == 44)

        // The same rows, as the sample importer keeps them, sent as the visits API's JSON.
        let visits = try VisitFile.sampleCSV(String(contentsOf: Self.sample, encoding: .utf8), deviceId: "x")
        let items = visits.map { v -> JSONValue in
            .object([
                "id": .string(v.id), "arrival": .double(v.arrival), "departure": .double(v.departure),
                "latitude": .double(v.latitude), "longitude": .double(v.longitude),
                "horizontal_accuracy": .double(v.horizontalAccuracy),
            ])
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("zois-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ServerProcess.start(database: directory.appendingPathComponent("db.sqlite").path)
        defer { server.terminate() }
        let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
        #expect(try await client.get("/v1/devices/sample/zois").status == 404)
        // In two requests: the pipeline state carries over between them.
        for chunk in [Array(items[..<80]), Array(items[80...])] {
            let body = String(decoding: JSONWriter.bytes(.object(["visits": .array(chunk)])), as: UTF8.self)
            let reply = try await client.post("/v1/devices/sample/visits", json: body)
            #expect(reply.status == 200, "\(reply.text)")
            #expect(reply.json?["accepted"] == .int(Int64(chunk.count)))
        }
        let fromHTTP = try #require(try await client.get("/v1/devices/sample/zois").json)
        #expect(fromHTTP == fromCLI)
        let listed = try #require(try await client.get("/v1/devices/sample/visits").json?["visits"])
        guard case .array(let stored) = listed else {
            Issue.record("visits is not a list: \(listed)")
            return
        }
        #expect(stored.map { $0["id"]?.stringValue ?? "" } == visits.map(\.id))
    }

    @Test("a bad file is refused with the line, and stdout stays empty")
    func badFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("zois-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("bad.csv")
        try Data("a,10,POINT(1 2),2018-12-19 10:30:35+00,2018-12-19 11:58:23+00\nb,5,POINT(1),x,y\n".utf8).write(
            to: file)
        let result = try ImportCommandTests.run(["zois", "--visits", file.path, "--json"])
        #expect(result.status != 0)
        #expect(result.out.isEmpty)
        #expect(result.err.contains("line 2"))
    }
}
