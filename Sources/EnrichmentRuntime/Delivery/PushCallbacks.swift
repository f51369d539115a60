import AsyncHTTPClient
import Crypto
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Posts each push's report to the push's `callback_url` once every one of its deliveries is final (issue 30).
///
/// Durable and shared by the nodes: a push's callback is a due time in the store. A node takes a due callback for
/// a minute (no other node posts it meanwhile), posts the report, and records the outcome; a failed post is tried
/// again with backoff (30 s doubling, 8 attempts over about two hours), then given up and shown as `failed` by
/// `GET /v1/push/{id}`. A node that dies after posting and before recording posts it again (at least once): the
/// receiver tells repeats by `push_id`.
struct PushCallbacks: Sendable {
    let outbox: any OutboxStore
    let clock: any WallClock
    let logger: Logger
    let secret: Secret?

    static let attempts = 8
    static let firstRetry = 30.0
    static let claim = 60.0
    static let timeout: TimeAmount = .seconds(10)

    /// Posts every callback due now (a few at a time); returns how many were tried.
    @discardableResult
    func dispatchDue() async throws -> Int {
        let now = clock.now().timeIntervalSince1970
        let due = try await outbox.callbacksDue(now: now, limit: 64)
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for callback in due {
                if running == 8 {
                    await group.next()
                    running -= 1
                }
                group.addTask { await self.post(callback) }
                running += 1
            }
        }
        return due.count
    }

    func post(_ callback: PushCallbackDue) async {
        let now = clock.now().timeIntervalSince1970
        do {
            guard try await outbox.claimCallback(pushId: callback.pushId, now: now, until: now + Self.claim),
                let report = try await outbox.report(pushId: callback.pushId)
            else { return }
            let confirmed = try await outbox.confirmedCount(pushId: callback.pushId)
            let body = Self.body(report, confirmed: confirmed, now: clock.now().timeIntervalSince1970)
            let outcome = await send(body, to: callback.url, pushId: callback.pushId)
            let attempt = callback.attempts + 1
            let retryAt: Double? =
                outcome == "sent" || attempt >= Self.attempts
                ? nil : clock.now().timeIntervalSince1970 + Self.firstRetry * Double(1 << (attempt - 1))
            try await outbox.recordCallback(
                pushId: callback.pushId, at: clock.now().timeIntervalSince1970, outcome: outcome, retryAt: retryAt)
            if outcome != "sent" {
                let metadata: Logger.Metadata = [
                    "push_id": "\(callback.pushId)", "outcome": "\(outcome)", "attempt": "\(attempt)",
                ]
                if retryAt == nil {
                    logger.error("push callback given up after \(attempt) attempts", metadata: metadata)
                } else {
                    logger.warning("push callback failed; it is tried again", metadata: metadata)
                }
            }
        } catch {
            // The store is out: the callback stays due (or its claim runs out) and is tried on a later pass.
            logger.warning(
                "push callback not tried: the store did not answer",
                metadata: ["push_id": "\(callback.pushId)", "error": "\(error)"])
        }
    }

    /// One POST; `sent` or why not (the status, or the error). Redirects are not followed.
    func send(_ body: [UInt8], to url: String, pushId: String) async -> String {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "user-agent", value: "enrichment-server push callback")
        request.headers.add(name: "enrich-push-id", value: pushId)
        if let secret {
            request.headers.add(name: "enrich-signature", value: Self.signature(body, key: secret.exposed))
        }
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await WebhookQueue.client.execute(request, timeout: Self.timeout)
            _ = try? await response.body.collect(upTo: 64 << 10)
            return (200...299).contains(response.status.code) ? "sent" : "HTTP \(response.status.code)"
        } catch {
            return "unreachable: \(error)"
        }
    }

    /// `sha256=` and the HMAC-SHA256 of the body under `key`, in lower-case hex.
    static func signature(_ body: [UInt8], key: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Data(key.utf8)))
        return "sha256=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    /// `{event: "push_final", push_id, app, created_at, final_at, counts, summary}`: the figures of
    /// `GET /v1/push/{id}` without the per-device list (fetch it there).
    static func body(_ report: PushReport, confirmed: Int, now: Double) -> [UInt8] {
        var o = JSONObjectWriter(capacity: 1024)
        o.field("event", "push_final")
        o.field("push_id", report.push.id)
        o.field("app", report.push.deviceIds.first.map { AppNamespace.app(of: $0) } ?? AppNamespace.defaultApp)
        o.field("created_at", report.push.createdAt)
        o.field("final_at", now)
        let counts = report.counts
        o.object("counts") { c in
            for state in DeliveryState.allCases { c.field(state.rawValue, counts[state] ?? 0) }
        }
        o.field("summary", object: PushSummary(report: report, confirmed: confirmed, now: now))
        o.field("status_url", "/v1/push/\(report.push.id)")
        return o.finished()
    }
}
