import Foundation
import Hummingbird
import Logging
import NIOCore
public import Synchronization

/// A real HTTP server playing the Woosmap Search API. The first path segment picks the behaviour:
/// `/ok`, `/slow`, `/500`, `/403`, `/garbage`, `/empty`, `/notgeo`. It records the query strings it saw.
public final class FakePlacesAPI: Sendable {
    public let queries = Mutex<[String]>([])

    public init() {}

    public static let featureCollection = #"""
        {"type":"FeatureCollection","features":[
         {"type":"Feature","properties":{"store_id":"far","name":"Far Store","address":{"lines":["2 rue"],"country_code":"FR","city":"Lyon","zipcode":"69001"},"types":[],"tags":[],"distance":900.5},"geometry":{"type":"Point","coordinates":[3.89,43.61]}},
         {"type":"Feature","properties":{"store_id":"near","name":"Near Store","address":{"lines":["1 rue"],"country_code":"FR","city":"Montpellier","zipcode":"34000"},"types":[],"tags":[],"distance":135.28682936},"geometry":{"type":"Point","coordinates":[3.8807,43.6048]}}
        ],"pagination":{"page":1,"pageCount":1}}
        """#

    public func run<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
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
