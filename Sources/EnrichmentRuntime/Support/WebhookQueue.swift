import APNsCore
import AsyncHTTPClient
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Posts JSON events to a webhook URL, off the caller's path: token deactivations (`ENRICH_FEEDBACK_URL`) and
/// location events (`ENRICH_LOCATION_WEBHOOK_URL`).
///
/// `post` never waits: events queue (at most `capacity`; beyond it the oldest are dropped and counted) and one
/// task sends them in order, each with up to `attempts` tries and backoff. Bodies are never logged.
///
/// An event is posted to exactly the configured URL: redirects are not followed (a receiver that answers 3xx could
/// otherwise send events, and whatever the URL carries, to another host). A 3xx is a failed attempt, logged with
/// its status and retried like any other.
final class WebhookQueue: Sendable {
    /// The client webhooks go through: the process's event loops, redirects never followed, and a receiver that
    /// stops sending for 10 s in the middle of an answer is given up on (a request's own deadline covers only
    /// the wait for the answer's head).
    static let client = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5), read: .seconds(10))))

    let url: String
    let name: String
    let attempts: Int
    let logger: Logger
    private let events: AsyncStream<[UInt8]>
    private let continuation: AsyncStream<[UInt8]>.Continuation

    init(url: String, name: String, attempts: Int = 3, capacity: Int = 10_000, logger: Logger) {
        self.url = url
        self.name = name
        self.attempts = attempts
        self.logger = logger
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(capacity))
    }

    /// Queues one event body.
    func post(_ body: [UInt8]) {
        if case .dropped = continuation.yield(body) {
            logger.warning("\(name) webhook queue full; the oldest event was dropped")
        }
    }

    /// Ends the queue; `run` returns once the queued events are sent (or given up).
    func finish() { continuation.finish() }

    /// Sends queued events until `finish()` and the queue is empty.
    func run() async {
        for await body in events {
            await send(body)
        }
    }

    /// POSTs one JSON body to `url` through `client` with `headers`, reads (at most 64 KiB of) the answer, and
    /// returns its status; throws when the receiver cannot be reached or does not answer within `timeout`.
    static func post(
        _ body: [UInt8], to url: String, headers: [(String, String)] = [], timeout: TimeAmount
    ) async throws -> UInt {
        // Checked at every call, not only when the URL was accepted: AsyncHTTPClient traps on some URLs (a port
        // above 65535) instead of throwing, which would stop the process.
        if let problem = OutboundURL.problem(url) { throw OutboundURLError(problem: problem) }
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await client.execute(request, timeout: timeout)
        _ = try? await response.body.collect(upTo: 64 << 10)
        return response.status.code
    }

    private func send(_ body: [UInt8]) async {
        var delay = 0.5
        for attempt in 1...attempts {
            do {
                let status = try await Self.post(body, to: url, timeout: .seconds(5))
                if (200...299).contains(status) { return }
                if (300...399).contains(status) {
                    logger.warning(
                        "\(name) webhook answered a redirect, which is not followed: set the webhook URL to where events should go",
                        metadata: ["status": "\(status)", "attempt": "\(attempt)"])
                } else {
                    logger.warning(
                        "\(name) webhook refused an event", metadata: ["status": "\(status)", "attempt": "\(attempt)"])
                }
            } catch {
                logger.warning(
                    "\(name) webhook unreachable", metadata: ["error": "\(error)", "attempt": "\(attempt)"])
            }
            if attempt < attempts {
                try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
                delay *= 2
            }
        }
        logger.error("\(name) webhook event given up after \(attempts) attempts")
    }
}

extension WebhookQueue {
    /// The JSON body of one token deactivation.
    static func body(_ registration: TokenRegistration) -> [UInt8] {
        var o = JSONObjectWriter(capacity: 512)
        o.field("event", "token_deactivated")
        o.field("app", AppNamespace.app(of: registration.deviceId))
        o.field("device_id", AppNamespace.id(of: registration.deviceId))
        o.field("token", registration.token)
        o.field("topic", registration.topic)
        o.field("environment", registration.environment.rawValue)
        o.field("reason", registration.reason)
        o.field("invalidated_at", registration.invalidatedAt)
        o.field("registered_at", registration.registeredAt)
        return o.finished()
    }
}
