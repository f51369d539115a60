import Crypto
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore

/// Posts each push's report to the push's `callback_url` once every one of its deliveries is final (issue 30).
///
/// Durable and shared by the nodes: a push's callback is a due time in the store. A node takes a due callback for
/// a minute (no other node posts it meanwhile), posts the report, and records the outcome; a failed post is tried
/// again with backoff (30 s doubling, 8 attempts over about an hour), then given up and shown as `failed` by
/// `GET /v1/push/{id}`. A node that dies after posting and before recording posts it again (at least once): the
/// receiver tells repeats by `push_id`.
public struct PushCallbacks: Sendable {
    let outbox: any OutboxStore
    let clock: any WallClock
    let logger: Logger
    let secret: Secret?
    /// The hosts callbacks may go to now (ENRICH_PUSH_CALLBACK_HOSTS).
    let hosts: [String]

    static let attempts = 8
    static let firstRetry = 30.0
    static let claim = 60.0
    static let timeout: TimeAmount = .seconds(10)

    /// Most callbacks read per look; a full page is followed by another look at once.
    static let page = 64

    /// Posts every callback due now (a few at a time); returns how many were tried.
    @discardableResult
    func dispatchDue() async throws -> Int {
        let now = clock.now().timeIntervalSince1970
        let due = try await outbox.callbacksDue(now: now, limit: Self.page)
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
        let claimed: Bool
        do {
            claimed = try await outbox.claimCallback(pushId: callback.pushId, now: now, until: now + Self.claim)
        } catch {
            // The store is out: the callback stays due and is tried on a later pass.
            logger.warning(
                "push callback not tried: the store did not answer",
                metadata: ["push_id": "\(callback.pushId)", "error": "\(error)"])
            return
        }
        guard claimed else { return }
        let outcome: String
        var final = false
        if let problem = Self.urlProblem(callback.url, hosts: hosts) {
            // The operator took the host off the list since the push was made: never called.
            outcome = problem
            final = true
        } else {
            do {
                let now = clock.now().timeIntervalSince1970
                guard let status = try await outbox.status(pushId: callback.pushId, now: now) else { return }
                let body = Self.body(status, now: now)
                outcome = await send(body, to: callback.url, pushId: callback.pushId)
            } catch {
                outcome = "the report could not be read: \(error)"
            }
        }
        // Stopping (the node shuts down): nothing is recorded; the claim runs out and the callback is tried again.
        if Task.isCancelled { return }
        let attempt = callback.attempts + 1
        let retryAt: Double? =
            outcome == "sent" || final || attempt >= Self.attempts
            ? nil : clock.now().timeIntervalSince1970 + Self.retryDelay(afterAttempt: attempt)
        do {
            try await outbox.recordCallback(
                pushId: callback.pushId, at: clock.now().timeIntervalSince1970, outcome: outcome, retryAt: retryAt)
        } catch {
            logger.warning(
                "push callback outcome not recorded: the store did not answer; it may be posted again",
                metadata: ["push_id": "\(callback.pushId)", "error": "\(error)"])
        }
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
    }

    /// 30 s after the first attempt, doubling: 30 s, 1, 2, 4, 8, 16 and 32 min (about 64 min in all).
    static func retryDelay(afterAttempt attempt: Int) -> Double {
        firstRetry * Double(1 << (attempt - 1))
    }

    /// Why a stored callback URL may not be called now (its host is no longer allowed), or nil.
    ///
    /// A stored URL is checked again before each call (`OutboundURL`): one written by an older version, or by
    /// hand, fails its own callback instead of trapping inside the HTTP client and stopping the process.
    static func urlProblem(_ url: String, hosts: [String]) -> String? {
        if let problem = OutboundURL.problem(url) { return "not called: \(problem)" }
        guard let host = URL(string: url)?.host?.lowercased() else { return "not called: it has no host" }
        return isAllowed(host: host, hosts: hosts)
            ? nil : "host \(host) is no longer in ENRICH_PUSH_CALLBACK_HOSTS: not called"
    }

    /// Whether a URL's (lower-case) host is one of `hosts`; an IPv6 literal matches with or without brackets.
    public static func isAllowed(host: String, hosts: [String]) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return hosts.contains(bare) || hosts.contains(host)
    }

    /// One POST; `sent` or why not (the status, or the error). Redirects are not followed.
    func send(_ body: [UInt8], to url: String, pushId: String) async -> String {
        var headers = [("user-agent", "enrichment-server push callback"), ("enrich-push-id", pushId)]
        if let secret { headers.append(("enrich-signature", Self.signature(body, key: secret.exposed))) }
        do {
            let status = try await WebhookQueue.post(body, to: url, headers: headers, timeout: Self.timeout)
            return (200...299).contains(status) ? "sent" : "HTTP \(status)"
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
    static func body(_ status: PushStatus, now: Double) -> [UInt8] {
        var o = JSONObjectWriter(capacity: 1024)
        o.field("event", "push_final")
        o.field("push_id", status.push.id)
        o.field("app", status.push.app)
        o.field("created_at", status.push.createdAt)
        o.field("final_at", now)
        let counts = status.counts.deliveries
        o.object("counts") { c in
            for state in DeliveryState.allCases { c.field(state.rawValue, counts[state] ?? 0) }
        }
        o.field("summary", object: PushSummary(status: status))
        o.field("status_url", "/v1/push/\(status.push.id)")
        return o.finished()
    }
}
