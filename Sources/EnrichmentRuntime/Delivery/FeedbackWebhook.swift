import AsyncHTTPClient
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Posts each token deactivation to `ENRICH_FEEDBACK_URL` as JSON, off the sending path.
///
/// `post` never waits: events queue (at most `capacity`; beyond it the oldest are dropped and counted) and one
/// task sends them in order, each with up to `attempts` tries and backoff. Logs never carry the whole token.
final class FeedbackWebhook: Sendable {
    let url: String
    let attempts: Int
    let logger: Logger
    private let events: AsyncStream<TokenRegistration>
    private let continuation: AsyncStream<TokenRegistration>.Continuation

    init(url: String, attempts: Int = 3, capacity: Int = 10_000, logger: Logger) {
        self.url = url
        self.attempts = attempts
        self.logger = logger
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(capacity))
    }

    /// Queues one deactivation.
    func post(_ registration: TokenRegistration) {
        if case .dropped = continuation.yield(registration) {
            logger.warning("feedback webhook queue full; the oldest event was dropped")
        }
    }

    /// Ends the queue; `run` returns once the queued events are sent (or given up).
    func finish() { continuation.finish() }

    /// Sends queued events until `finish()` and the queue is empty.
    func run() async {
        for await registration in events {
            await send(registration)
        }
    }

    /// The JSON body of one event.
    static func body(_ registration: TokenRegistration) -> [UInt8] {
        var o = JSONObjectWriter(capacity: 512)
        o.field("event", "token_deactivated")
        o.field("device_id", registration.deviceId)
        o.field("token", registration.token)
        o.field("topic", registration.topic)
        o.field("environment", registration.environment.rawValue)
        o.field("reason", registration.reason)
        o.field("invalidated_at", registration.invalidatedAt)
        o.field("registered_at", registration.registeredAt)
        return o.finished()
    }

    private func send(_ registration: TokenRegistration) async {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: Self.body(registration)))
        var delay = 0.5
        for attempt in 1...attempts {
            do {
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
                _ = try? await response.body.collect(upTo: 64 << 10)
                if (200...299).contains(response.status.code) { return }
                logger.warning(
                    "feedback webhook refused an event",
                    metadata: ["status": "\(response.status.code)", "attempt": "\(attempt)"])
            } catch {
                logger.warning(
                    "feedback webhook unreachable", metadata: ["error": "\(error)", "attempt": "\(attempt)"])
            }
            if attempt < attempts {
                try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
                delay *= 2
            }
        }
        logger.error(
            "feedback webhook event given up",
            metadata: [
                "token": "\(DeviceTokenFormat.redacted(registration.token))", "reason": "\(registration.reason ?? "")",
            ])
    }
}
