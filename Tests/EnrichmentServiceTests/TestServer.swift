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

/// A real HTTP server playing the Woosmap Search API. The first path segment picks the behaviour:
/// `/ok`, `/slow`, `/500`, `/403`, `/garbage`, `/empty`, `/notgeo`. It records the query strings it saw.
final class FakePlacesAPI: Sendable {
    let queries = Mutex<[String]>([])

    static let featureCollection = #"""
        {"type":"FeatureCollection","features":[
         {"type":"Feature","properties":{"store_id":"far","name":"Far Store","address":{"lines":["2 rue"],"country_code":"FR","city":"Lyon","zipcode":"69001"},"types":[],"tags":[],"distance":900.5},"geometry":{"type":"Point","coordinates":[3.89,43.61]}},
         {"type":"Feature","properties":{"store_id":"near","name":"Near Store","address":{"lines":["1 rue"],"country_code":"FR","city":"Montpellier","zipcode":"34000"},"types":[],"tags":[],"distance":135.28682936},"geometry":{"type":"Point","coordinates":[3.8807,43.6048]}}
        ],"pagination":{"page":1,"pageCount":1}}
        """#

    func run<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        let router = Router()
        router.get("/{mode}/stores/search") { [self] request, context -> Response in
            self.queries.withLock { $0.append(request.uri.query ?? "") }
            let mode = context.parameters.get("mode") ?? "ok"
            func json(_ text: String, _ status: HTTPResponse.Status = .ok) -> Response {
                Response(
                    status: status, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: text)))
            }
            switch mode {
            case "slow":
                try await Task.sleep(for: .seconds(10))
                return json(Self.featureCollection)
            case "500": return json(#"{"error":"boom"}"#, .internalServerError)
            case "403": return json(#"{"detail":"bad key"}"#, .forbidden)
            case "garbage": return json("<html>not json")
            case "notgeo": return json(#"{"hello":"world"}"#)
            case "farther-than-earth":
                return json(Self.featureCollection.replacingOccurrences(of: "900.5", with: "1e300"))
            case "negative": return json(Self.featureCollection.replacingOccurrences(of: "135.28682936", with: "-5"))
            case "empty":
                return json(#"{"type":"FeatureCollection","features":[],"pagination":{"page":1,"pageCount":0}}"#)
            default: return json(Self.featureCollection)
            }
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            logger: {
                var logger = Logger(label: "fake-places")
                logger.logLevel = .critical
                return logger
            }())
        return try await withRunningApplication(app, ports: ports) { port in try await body("http://127.0.0.1:\(port)")
        }
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
