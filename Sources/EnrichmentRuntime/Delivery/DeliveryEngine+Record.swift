import APNsCore
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import Synchronization
import Tracing

/// The record stage: answers are written back in one transaction per group, the circuits and metrics are told,
/// and token hygiene follows (deactivations, the feedback webhook).
extension DeliveryEngine {
    /// Writes a group of answers (and deliveries settled without sending) in one transaction, each with its
    /// device's enrichment outcome, then applies the token hygiene they call for. Returns how many stay pending.
    func record(
        _ answers: [(Attempt, APNsSendResult, Duration)], settled: [DeliveryUpdate], owner: String,
        pushOf: [Int64: String]
    ) async throws -> Int {
        var updates = settled
        var deactivations: [TokenDeactivation] = []
        var activityDeactivations: [TokenDeactivation] = []
        var waiting: [SenderKey: Int] = [:]
        let answeredAt = clock.now().timeIntervalSince1970
        for (attempt, result, elapsed) in answers {
            observer?.apnsLatency(elapsed)
            let environment = attempt.key
            if DeliveryPlanner.isOutage(result), let circuit = circuits[environment] {
                // The way to APNs failed, not the device: the delivery waits for the peer, and the peer pauses.
                if let change = circuit.recordOutage(at: answeredAt, cause: cause(of: result, environment: environment))
                {
                    report(change, environment: environment, cause: result)
                }
                updates.append(
                    planner.wait(
                        attempt.claim, verdict: attempt.verdict, result: result, until: circuit.probeAt,
                        deadline: attempt.deadline, at: answeredAt))
                waiting[environment, default: 0] += 1
                continue
            }
            if result.transportError == nil, let change = circuits[environment]?.recordAnswer(at: answeredAt) {
                report(change, environment: environment, cause: result)
            }
            let (update, deactivation) = planner.answer(
                attempt.claim, result: result, verdict: attempt.verdict, at: answeredAt)
            updates.append(update)
            if let deactivation {
                if attempt.request.pushType == .liveactivity {
                    activityDeactivations.append(deactivation)
                } else {
                    deactivations.append(deactivation)
                }
            }
        }
        for (environment, count) in waiting { observer?.waitingForAPNs(count, environment: environment.description) }
        try await enricher.spans.run("db.record_answers", kind: .client) { span in
            span?.attributes["delivery.updates"] = updates.count
            let settled = updates
            _ = try await bounded { try await self.outbox.complete(settled, owner: owner) }
        }
        reportEnded(updates, pushOf: pushOf)
        let pending = updates.count { $0.state == .pending }
        if let observer {
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
                    try await bounded {
                        try await self.activities?.invalidate(
                            deviceId: deactivation.deviceId, token: deactivation.token, reason: deactivation.reason,
                            at: deactivation.invalidatedAt, unlessRegisteredAfter: deactivation.unlessRegisteredAfter)
                    } ?? 0
                guard marked > 0 else { continue }
                observer?.deactivated(reason: deactivation.reason)
                logger.info(
                    "Live Activity token invalid",
                    metadata: [
                        "device_id": "\(deactivation.deviceId)",
                        "token": "\(DeviceTokenFormat.redacted(deactivation.token))",
                        "reason": "\(deactivation.reason)",
                    ])
            } catch {
                logger.error("cannot mark a Live Activity token invalid", metadata: ["error": "\(error)"])
            }
        }
        for deactivation in deactivations {
            do {
                guard let registration = try await bounded({ try await self.tokens.deactivate(deactivation) }) else {
                    continue
                }
                observer?.deactivated(reason: deactivation.reason)
                logger.info(
                    "token deactivated",
                    metadata: [
                        "device_id": "\(registration.deviceId)",
                        "token": "\(DeviceTokenFormat.redacted(registration.token))",
                        "reason": "\(deactivation.reason)",
                    ])
                feedback?.post(WebhookQueue.body(registration))
            } catch {
                logger.error("cannot deactivate a token", metadata: ["error": "\(error)"])
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
            logger.warning(
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

    /// An enrichment's result as the metrics count it.
    struct EnrichmentResultKey: Hashable {
        var outcome: String
        var provider: String
    }
}
