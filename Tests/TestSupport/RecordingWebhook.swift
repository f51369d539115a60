public import Essentials
import Foundation
import Hummingbird
import Logging
import NIOCore
public import Synchronization

/// A real HTTP server that records the JSON bodies POSTed to `/hook` (a feedback webhook receiver).
/// `/fail-once` answers the very first POST with 500 (to see the sender retry), then records as `/hook` does.
/// `/redirect-once` answers the very first POST with a 307 to `http://localhost:PORT/stolen` (another host name),
/// then records as `/hook` does; what reaches `/stolen` is kept in `stolen`.
public final class RecordingWebhook: Sendable {
    public let bodies = Mutex<[JSONValue]>([])
    public let refused = Mutex(0)
    public let stolen = Mutex<[JSONValue]>([])
    /// Each recorded body as it came, with the request's `enrich-signature` and `enrich-push-id` headers.
    public let raw = Mutex<[(body: [UInt8], signature: String?, pushId: String?)]>([])
    private let port = Mutex(0)

    public init() {}

    public func run<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        let router = Router()
        router.post("/{mode}") { [self] request, context -> Response in
            let buffer = try await request.body.collect(upTo: 1 << 20)
            let document = try JSONValue.decode(Data(buffer.readableBytesView))
            let mode = context.parameters.get("mode")
            if mode == "stolen" {
                stolen.withLock { $0.append(document) }
                return Response(status: .noContent)
            }
            if mode == "fail-once" || mode == "redirect-once" {
                let refuse = refused.withLock { count in
                    guard count == 0 else { return false }
                    count = 1
                    return true
                }
                if refuse, mode == "redirect-once" {
                    let location = "http://localhost:\(port.withLock { $0 })/stolen"
                    return Response(status: .temporaryRedirect, headers: [.location: location])
                }
                if refuse { return Response(status: .internalServerError) }
            }
            bodies.withLock { $0.append(document) }
            raw.withLock {
                $0.append(
                    (
                        Array(buffer.readableBytesView),
                        request.headers.first { $0.name.canonicalName == "enrich-signature" }?.value,
                        request.headers.first { $0.name.canonicalName == "enrich-push-id" }?.value
                    ))
            }
            return Response(status: .noContent)
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            logger: {
                var logger = Logger(label: "webhook")
                logger.logLevel = .critical
                return logger
            }())
        return try await withRunningApplication(app, ports: ports) { port in
            self.port.withLock { $0 = port }
            return try await body("http://127.0.0.1:\(port)")
        }
    }
}
