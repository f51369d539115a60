import AsyncHTTPClient
import EnrichmentCore
import EnrichmentRuntime
import EnrichmentService
import Essentials
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization
import TestSupport

/// Runs `body` against a real instance of the service on 127.0.0.1:0 with a fresh database, then stops it.
func withService<T: Sendable>(
    _ adjust: (inout ServiceConfiguration) -> Void = { _ in },
    clock: any WallClock = SystemWallClock(),
    _ body: @Sendable (ServiceClient) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("svc-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = ServiceConfiguration()
    configuration.port = 0
    configuration.databasePath = directory.appendingPathComponent("db.sqlite").path
    // Stopping by cancellation makes Hummingbird log a harmless "Already closed" error; tests assert behaviour, not logs.
    configuration.logLevel = .critical
    adjust(&configuration)
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = try await buildApplication(configuration, clock: clock, logger: Logger(label: "test")) { port in
        continuation.yield(port)
    }
    return try await withRunningApplication(app, ports: ports) { port in
        try await body(ServiceClient(base: "http://127.0.0.1:\(port)"))
    }
}

/// A payload for `now` with the given category and timestamp expression.
func locationPayload(timestamp: String, category: String = "location") -> String {
    #"{"aps":{"alert":{"title":"Hello","subtitle":"Sub","body":"Original"},"mutable-content":1,"category":"\#(category)","timestamp":\#(timestamp)}}"#
}

func enrichBody(device: String, payload: String, at: Int64? = nil, mode: String? = nil) -> String {
    var fields = [#""device_id":"\#(device)""#, #""payload":\#(payload)"#]
    if let at { fields.append(#""at":\#(at)"#) }
    if let mode { fields.append(#""mode":"\#(mode)""#) }
    return "{" + fields.joined(separator: ",") + "}"
}

/// Points delivery at the mock APNs: the throwaway token key and CA (`writeMockCredentials`), one URL per
/// environment.
func deliverToMock(
    _ configuration: inout ServiceConfiguration, keyFile: String, caFile: String, sandbox: String,
    production: String
) {
    configuration.delivery.keyFile = keyFile
    configuration.delivery.keyID = "KEYID12345"
    configuration.delivery.teamID = "TEAMID6789"
    configuration.delivery.caFile = caFile
    configuration.delivery.sandboxURL = sandbox
    configuration.delivery.productionURL = production
}
