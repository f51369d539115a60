import APNsCore
import Delivery
import EnrichmentPostgres
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Issue 47, item 1: a callback URL the HTTP client would trap on (a port above 65535) is refused at the door, and
/// one already stored (by an older version, or by hand) fails its own callback instead of stopping the process,
/// on every restart.
@Suite("A bad callback URL never stops the service", .serialized)
struct CallbackURLRestartTests {
    static let badURL = "http://127.0.0.1:99999/cb"

    /// Commits a finished push (no deliveries) whose stored callback is `url`, straight through the store: the
    /// API no longer takes such a URL, as a database written by an earlier version still may hold it.
    static func plantPush(database: String, databaseURL: String?, url: String) async throws -> String {
        var configuration = ServiceConfiguration()
        configuration.databasePath = database
        configuration.databaseURL = databaseURL.map { Secret($0) }
        let runtime = try await EnrichmentRuntime.open(configuration, scope: .storage)
        defer { runtime.postgres?.close() }
        let id = UUID().uuidString.lowercased()
        let payload = JSONValue.object(["aps": .object(["alert": .string("x")])])
        let push = PushDefinition(
            id: id, createdAt: Date().timeIntervalSince1970 - 5, payload: payload,
            pushType: .alert, enrich: false, deviceIds: ["planted"], callbackURL: url)
        try await runtime.outbox.enqueue(push, outcomes: [], deliveries: [])
        return id
    }

    /// Waits (up to `seconds`) for the push's callback to leave the state `waiting`/`due`; returns it.
    static func settledCallback(_ client: ServiceClient, _ pushId: String, seconds: Double = 20) async throws
        -> JSONValue?
    {
        let deadline = Date().addingTimeInterval(seconds)
        var callback: JSONValue?
        while Date() < deadline {
            callback = try await client.get("/v1/push/\(pushId)").json?["callback"]
            if let attempts = callback?["attempts"]?.lenientDouble, attempts >= 1 { return callback }
            try await Task.sleep(for: .milliseconds(100))
        }
        return callback
    }

    @Test(
        "the exact request is a 400; a stored one fails its callback and the process lives on, restart after restart",
        arguments: Backend.allCases)
    func refusedAndSurvived(backend: Backend) async throws {
        try await withMock { mock, _ in
            let setup = try DeliveryDurabilityTests.Setup(mock: mock)
            defer { try? FileManager.default.removeItem(at: setup.directory) }
            let databaseURL = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
            var environment = setup.environment
            environment["ENRICH_PUSH_CALLBACK_HOSTS"] = "127.0.0.1"
            if let databaseURL { environment["ENRICH_DATABASE_URL"] = databaseURL }

            let first = try ServerProcess.start(database: setup.database, environment: environment)
            let client = ServiceClient(base: "http://127.0.0.1:\(first.port)")
            let refused = try await client.post(
                "/v1/push",
                json: #"{"device_ids":["a"],"payload":{"aps":{"alert":"hi"}},"callback_url":"\#(Self.badURL)"}"#)
            #expect(refused.status == 400, "\(refused.text)")
            #expect(refused.json?["error"]?["field"] == .string("callback_url"))
            #expect(refused.json?["error"]?["message"]?.stringValue?.contains("65535") == true, "\(refused.text)")
            first.kill9()

            let pushId = try await Self.plantPush(database: setup.database, databaseURL: databaseURL, url: Self.badURL)
            for round in 1...2 {
                let server = try ServerProcess.start(database: setup.database, environment: environment)
                let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
                let callback = try await Self.settledCallback(client, pushId)
                #expect(callback?["state"] == .string("failed"), "round \(round): \(String(describing: callback))")
                #expect(
                    callback?["last_outcome"]?.stringValue?.contains("port 99999") == true,
                    "round \(round): \(String(describing: callback))")
                // Given up at once (no retry of a URL that can never be called), and the process still answers.
                #expect(callback?["next_attempt_at"] == nil || callback?["next_attempt_at"] == .null)
                try await Task.sleep(for: .seconds(1))
                #expect(server.process.isRunning, "round \(round): the process died")
                #expect(try await client.get("/health/live").status == 200)
                server.kill9()
            }
        }
    }
}
