public import APNsCore

/// The decisions of delivery, with no storage, clock or socket: which claimed deliveries are settled without
/// sending, which request each of the others becomes, and what each answer means (delivered, retried after a
/// backoff, failed, and whether the token is to be deactivated). The engine performs what it decides.
///
/// Every rule is the APNs family's own, written once there: header rules (`APNsValidator`), backoff and which
/// answers are worth retrying (`RetryPolicy`), which reasons invalidate a token (`APNsReason.invalidatesToken`).
public struct DeliveryPlanner: Sendable, Equatable {
    /// Attempts per delivery in all, and the backoff between them (durable: kept in the outbox, not in memory).
    public var retry: RetryPolicy

    public init(retry: RetryPolicy) {
        self.retry = retry
    }

    /// Claimed deliveries grouped by (push, device), in the order they were claimed: a group is enriched once and
    /// sent to each of the device's registrations.
    public static func groups(_ claimed: [ClaimedDelivery]) -> [[ClaimedDelivery]] {
        var groups: [[ClaimedDelivery]] = []
        var positions: [String: Int] = [:]
        for claim in claimed {
            let key = claim.pushId + "\u{0}" + claim.delivery.deviceId
            if let position = positions[key] {
                groups[position].append(claim)
            } else {
                positions[key] = groups.count
                groups.append([claim])
            }
        }
        return groups
    }

    /// What a group of one push and one device comes to before anything is sent.
    public enum GroupDecision: Sendable, Equatable {
        /// Enrich the device's payload and send it to each claim.
        case send(PushDefinition)
        /// Nothing to send: these updates settle the claims (the push record is gone, or it expired).
        case settle([DeliveryUpdate])
    }

    /// Decides a group: sent, or settled as failed (no push record) or expired (its `apns-expiration` passed).
    public func decide(_ claims: [ClaimedDelivery], push: PushDefinition?, now: Double) -> GroupDecision {
        guard let push else {
            return .settle(
                claims.map {
                    DeliveryUpdate(
                        id: $0.id, state: .failed, attempts: $0.attempts, error: "the push record is missing",
                        finishedAt: now)
                })
        }
        if push.hasExpired(at: now) {
            return .settle(
                claims.map {
                    DeliveryUpdate(
                        id: $0.id, state: .expired, attempts: $0.attempts,
                        error: "apns-expiration \(push.expiration ?? .immediately) passed before it could be sent",
                        finishedAt: now)
                })
        }
        return .send(push)
    }

    /// The enrichment's verdict for a device, carried by each of its attempts.
    public struct Verdict: Sendable, Equatable {
        public var outcome: String
        public var rule: String

        public init(outcome: String, rule: String) {
            self.outcome = outcome
            self.rule = rule
        }
    }

    /// One claim ready to go: the request, or the update that settles it because the request breaks a rule.
    public enum Prepared: Sendable, Equatable {
        case send(APNsRequest)
        case settle(DeliveryUpdate)
    }

    /// The request for one claim of `push` with the device's payload; a request that breaks one of Apple's rules
    /// is settled as failed with the status and reason Apple would answer, and never sent. `payload` is written
    /// from a JSON object (the enriched payload, or the push's own): its size is checked, its shape is known.
    public func prepare(
        _ claim: ClaimedDelivery, push: PushDefinition, payload: [UInt8], verdict: Verdict, now: Double
    ) -> Prepared {
        let request = APNsRequest(
            deviceToken: claim.delivery.token,
            topic: push.pushType.topic(forBundle: push.topic ?? claim.delivery.topic),
            pushType: push.pushType, priority: push.priority, expiration: push.expiration,
            collapseID: push.collapseId, apnsID: claim.delivery.apnsId, payload: payload)
        // The payload was written from the enriched JSON object: its shape needs no second parse, only its size.
        if let violation = APNsValidator.sendViolation(of: request.wire, payloadIsObject: true) {
            return .settle(
                DeliveryUpdate(
                    id: claim.id, state: .failed, attempts: claim.attempts, status: violation.status,
                    reason: violation.reason.rawValue, error: violation.message, outcome: verdict.outcome,
                    rule: verdict.rule, finishedAt: now))
        }
        return .send(request)
    }

    /// The update for one answered (or failed) attempt at `now`, and the token deactivation it calls for.
    ///
    /// 200 is delivered. An answer worth retrying (429, 5xx, no answer at all) before the last attempt is pending
    /// again after the backoff; anything else is failed. A failure whose reason invalidates the token deactivates
    /// it: from APNs's 410 timestamp (unless the device registered it again since), or, for a token that never
    /// belonged to this topic and environment, only that registration.
    public func answer(
        _ claim: ClaimedDelivery, result: APNsSendResult, verdict: Verdict, at now: Double
    ) -> (update: DeliveryUpdate, deactivation: TokenDeactivation?) {
        // A request refused before the wire (0 attempts) still counts as one, so a delivery always ends.
        let attempts = claim.attempts + max(1, result.attempts)
        var update = DeliveryUpdate(
            id: claim.id, state: .failed, attempts: attempts, status: result.status, reason: result.reason?.rawValue,
            apnsTimestamp: result.timestamp, error: result.transportError, outcome: verdict.outcome,
            rule: verdict.rule, finishedAt: now)
        if result.status == 200 {
            update.state = .delivered
            return (update, nil)
        }
        let retryable = result.status.map { RetryPolicy.isRetryable(status: $0, reason: result.reason) } ?? true
        if retryable, attempts < retry.maxAttempts {
            update.state = .pending
            update.finishedAt = nil
            update.nextAttemptAt = now + retry.backoff(afterAttempt: attempts)
            return (update, nil)
        }
        guard let reason = result.reason, reason.invalidatesToken else { return (update, nil) }
        let delivery = claim.delivery
        if reason == .unregistered || reason == .expiredToken {
            let invalidated = result.timestamp.map { Double($0) / 1000 }
            return (
                update,
                TokenDeactivation(
                    deviceId: delivery.deviceId, token: delivery.token, reason: reason.rawValue,
                    invalidatedAt: invalidated ?? now, unlessRegisteredAfter: invalidated)
            )
        }
        return (
            update,
            TokenDeactivation(
                deviceId: delivery.deviceId, token: delivery.token, reason: reason.rawValue, invalidatedAt: now,
                onlyFor: (delivery.topic, delivery.environment))
        )
    }
}
