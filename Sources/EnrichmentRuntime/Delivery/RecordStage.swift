import APNsCore
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import Synchronization
import Tracing

/// The record stage: answers are written back in one transaction per group, each with its device's enrichment
/// outcome; the circuits and metrics are told, and token hygiene follows (deactivations, the feedback webhook).
struct RecordStage: Sendable {
    let context: PipelineContext
    /// Live Activity tokens: one APNs says no longer works is marked invalid there.
    let activities: (any ActivityStore)?
    /// What becomes of each answer (no I/O: this stage performs what it decides).
    let planner: DeliveryPlanner
    /// One circuit breaker per environment's peer: an outage pauses sending there until a probe gets an answer.
    let circuits: [SenderKey: APNsCircuit]
    /// Who each credential is to APNs (`team TEAM123456, key ABC1234567`, or `certificate`), by credential name,
    /// for the log and readiness when APNs refuses it. No secret: ids only.
    let identities: [String: String]
    let feedback: WebhookQueue?
    let spans: SpanRecorder

    /// Writes a group of answers (and deliveries settled without sending) in one transaction, each with its
    /// device's enrichment outcome, then applies the token hygiene they call for. Returns how many stay pending.
    func record(
        _ answers: [(DeliveryAttempt, APNsSendResult, Duration)], settled: [DeliveryUpdate], owner: String,
        pushOf: [Int64: String]
    ) async throws -> Int {
        var updates = settled
        var deactivations: [TokenDeactivation] = []
        var activityDeactivations: [TokenDeactivation] = []
        var waiting: [SenderKey: Int] = [:]
        var mismatched: [SenderKey: Int] = [:]
        let answeredAt = context.now
        for (attempt, result, elapsed) in answers {
            context.observer?.apnsLatency(elapsed)
            let environment = attempt.key
            if DeliveryPlanner.isOutage(result), let circuit = circuits[environment] {
                // The way to APNs failed, not the device: the delivery waits for the peer, and the peer pauses.
                if let change = circuit.recordOutage(at: answeredAt, cause: cause(of: result, environment: environment))
                {
                    report(change, environment: environment, cause: result)
                }
                // Not before the peer's Retry-After (FCM's 503 carries one), whatever the circuit's probe says.
                updates.append(
                    planner.wait(
                        attempt.claim, verdict: attempt.verdict, result: result,
                        until: max(circuit.probeAt, answeredAt + (result.retryAfter ?? 0)),
                        deadline: attempt.deadline, at: answeredAt))
                waiting[environment, default: 0] += 1
                continue
            }
            // Any answer says the peer is there (an FCM error answer carries Google's message as its error).
            if result.status != nil, let change = circuits[environment]?.recordAnswer(at: answeredAt) {
                report(change, environment: environment, cause: result)
            }
            let (update, deactivation) = planner.answer(
                attempt.claim, result: result, verdict: attempt.verdict, at: answeredAt)
            updates.append(update)
            if environment.environment == .fcm, result.reason?.rawValue == "SENDER_ID_MISMATCH" {
                mismatched[environment, default: 0] += 1
            }
            if let deactivation {
                if attempt.request.pushType == .liveactivity {
                    activityDeactivations.append(deactivation)
                } else {
                    deactivations.append(deactivation)
                }
            }
        }
        for (environment, count) in waiting {
            context.observer?.waitingForAPNs(count, environment: environment.description)
        }
        for (environment, count) in mismatched {
            // A configuration error of the app, not of the device: its tokens were issued for another Firebase
            // project than its service account's. Said once per batch, naming the credential.
            context.logger.error(
                """
                FCM answered SENDER_ID_MISMATCH: registration tokens belong to another Firebase project than the \
                credential's; check the app's fcm_credential (or ENRICH_FCM_SERVICE_ACCOUNT_FILE)
                """,
                metadata: [
                    "credential": "\(environment.credential)", "deliveries": "\(count)",
                    "identity": "\(identity(of: environment) ?? "")",
                ])
        }
        try await spans.run("db.record_answers", kind: .client) { span in
            span?.attributes["delivery.updates"] = updates.count
            let settled = updates
            _ = try await context.bounded { try await context.outbox.complete(settled, owner: owner) }
        }
        reportEnded(updates, pushOf: pushOf)
        let pending = updates.count { $0.state == .pending }
        if let observer = context.observer {
            var tally: [AttemptResult: Int] = [:]
            for update in updates where !DeliveryPlanner.isWait(update) {
                tally[AttemptResult(state: update.state, status: update.status, reason: update.reason), default: 0] += 1
            }
            for (result, count) in tally {
                observer.attempts(count, state: result.state, status: result.status, reason: result.reason)
            }
        }
        for deactivation in activityDeactivations {
            do {
                let marked =
                    try await context.bounded {
                        try await activities?.invalidate(
                            deviceId: deactivation.deviceId, token: deactivation.token, reason: deactivation.reason,
                            at: deactivation.invalidatedAt, unlessRegisteredAfter: deactivation.unlessRegisteredAfter)
                    } ?? 0
                guard marked > 0 else { continue }
                context.observer?.deactivated(reason: deactivation.reason)
                context.logger.info(
                    "Live Activity token invalid",
                    metadata: [
                        "device_id": "\(deactivation.deviceId)",
                        "token": "\(DeviceTokenFormat.redacted(deactivation.token))",
                        "reason": "\(deactivation.reason)",
                    ])
            } catch {
                context.logger.error("cannot mark a Live Activity token invalid", metadata: ["error": "\(error)"])
            }
        }
        for deactivation in deactivations {
            do {
                guard
                    let registration = try await context.bounded({ try await context.tokens.deactivate(deactivation) })
                else {
                    continue
                }
                context.observer?.deactivated(reason: deactivation.reason)
                context.logger.info(
                    "token deactivated",
                    metadata: [
                        "device_id": "\(registration.deviceId)",
                        "token": "\(DeviceTokenFormat.redacted(registration.token))",
                        "reason": "\(deactivation.reason)",
                    ])
                feedback?.post(WebhookQueue.body(registration))
            } catch {
                context.logger.error("cannot deactivate a token", metadata: ["error": "\(error)"])
            }
        }
        return pending
    }

    /// One line per push and final outcome (`failed`, `expired`) among `updates`, with the count and the first
    /// reason, at `warning`: a push whose deliveries end badly is said once per batch, not once per device.
    func reportEnded(_ updates: [DeliveryUpdate], pushOf: [Int64: String]) {
        var ended: [String: (count: Int, example: String)] = [:]
        for update in updates where update.state == .failed || update.state == .expired {
            let key = "\(pushOf[update.id] ?? "?")\u{0}\(update.state.rawValue)"
            let why = update.reason ?? update.error ?? (update.status.map { "HTTP \($0)" } ?? "unknown")
            ended[key, default: (0, why)].count += 1
        }
        for (key, value) in ended.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "\u{0}", maxSplits: 1).map(String.init)
            context.logger.warning(
                "deliveries of a push ended \(parts[1])",
                metadata: [
                    "push_id": "\(parts[0])", "state": "\(parts[1])", "count": "\(value.count)",
                    "reason": "\(value.example)",
                ])
        }
    }

    /// A claimed delivery of a cancelled push, settled without sending (with its device's verdict when it was
    /// enriched before the cancel came).
    static func cancelledUpdate(
        _ claim: ClaimedDelivery, verdict: DeliveryPlanner.Verdict? = nil, at now: Double
    ) -> DeliveryUpdate {
        DeliveryUpdate(
            id: claim.id, state: .cancelled, attempts: claim.attempts, error: "cancelled before it was sent",
            outcome: verdict?.outcome, rule: verdict?.rule, finishedAt: now)
    }

    /// An attempt's result as the metrics count it.
    struct AttemptResult: Hashable {
        var state: DeliveryState
        var status: Int?
        var reason: String?
    }

    /// True when APNs refused the credential itself (a revoked or wrong `.p8` key, a token it calls expired), not
    /// the way to it.
    static func refusesCredential(_ result: APNsSendResult) -> Bool { DeliveryPlanner.refusesCredential(result) }

    /// Who a sender's credential is (a team and key, a certificate, a service account), never the secret.
    func identity(of key: SenderKey) -> String? {
        identities[key.environment == .fcm ? LoadedCredentials.fcmIdentityKey(key.credential) : key.credential]
    }

    /// Why a result opened `environment`'s circuit, in a phrase for readiness and the log.
    func cause(of result: APNsSendResult, environment: SenderKey) -> String {
        if Self.refusesCredential(result) {
            let who = identity(of: environment).map { " (\($0))" } ?? ""
            return "credential refused: \(result.status ?? 0) \(result.reason?.rawValue ?? "")\(who)"
        }
        if let transportError = result.transportError { return "unreachable: \(transportError)" }
        return "unreachable: HTTP \(result.status ?? 0) \(result.reason?.rawValue ?? "")"
    }

    /// Logs a circuit's change (the operator should know sending paused, why, and when it is back), and sets the
    /// metric. A refused credential is an `error` that names the credential, its team and key id: it will not mend
    /// by itself, unlike an unreachable APNs (a `warning`).
    func report(_ change: APNsCircuit.Change, environment: SenderKey, cause: APNsSendResult) {
        switch change {
        case .opened(let failures, let probeAt):
            context.observer?.circuit(environment: environment.description, state: APNsCircuit.State.open.rawValue)
            let wait = max(0, probeAt - context.now)
            var metadata: Logger.Metadata = [
                "environment": "\(environment)", "failures": "\(failures)",
                "next_probe_in": "\(String(format: "%.1f", wait)) s",
                "cause": "\(cause.transportError ?? "HTTP \(cause.status ?? 0) \(cause.reason?.rawValue ?? "")")",
            ]
            if Self.refusesCredential(cause) {
                metadata["credential"] = "\(environment.credential)"
                if let identity = identity(of: environment) { metadata["identity"] = "\(identity)" }
                let reason = cause.reason?.rawValue ?? ""
                let message: Logger.Message =
                    failures == 1
                    ? "APNs refused the credential (\(reason)): sending with it paused, deliveries wait (no attempt used); check the key is not revoked and its key id and team id match it"
                    : "APNs still refuses the credential: the probe failed, sending with it stays paused"
                context.logger.error(message, metadata: metadata)
            } else {
                context.logger.warning(
                    failures == 1
                        ? "APNs unreachable: sending paused, deliveries wait (no attempt used)"
                        : "APNs still unreachable: the probe failed, sending stays paused",
                    metadata: metadata)
            }
        case .closed(let outage):
            context.observer?.circuit(environment: environment.description, state: APNsCircuit.State.closed.rawValue)
            context.logger.warning(
                "APNs reachable again: sending resumed",
                metadata: [
                    "environment": "\(environment)", "outage": "\(String(format: "%.1f", outage)) s",
                ])
        }
    }
}
