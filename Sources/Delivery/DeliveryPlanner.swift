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
    /// Seconds a push without `apns-expiration` may wait for APNs (through an outage) before its deliveries end
    /// `expired`.
    public var maximumAge: Double

    public init(retry: RetryPolicy, maximumAge: Double = 3_600) {
        self.retry = retry
        self.maximumAge = maximumAge
    }

    /// The instant after which a push's deliveries are not sent any more: its `apns-expiration`, or `maximumAge`
    /// after it was made (after the delivery's scheduled send time, for a scheduled one).
    public func deadline(of push: PushDefinition, scheduledAt: Double? = nil) -> Double {
        guard let expiration = push.expiration, expiration.epochSeconds > 0 else {
            return max(push.createdAt, scheduledAt ?? push.createdAt) + maximumAge
        }
        return Double(expiration.epochSeconds) + 1
    }

    /// Whether a result says the way to APNs failed rather than the device: no answer at all (no connection, a
    /// connection lost, a timeout), or 500 / 503. Such a failure pauses the peer and never ends a delivery `failed`.
    public static func isOutage(_ result: APNsSendResult) -> Bool {
        guard let status = result.status else { return true }
        // A credential APNs refuses (a revoked or wrong .p8 key, a token it calls expired) stops every push sent
        // with it, and only those: they wait for the credential to be fixed, as for an outage, rather than fail
        // one by one; other apps' credentials keep sending.
        if refusesCredential(result) { return true }
        return status == 500 || status == 503
    }

    /// The update for a claim that was not sent because the peer's circuit is open (or sent and lost to an
    /// outage): pending again at `retryAt`, with no attempt used unless the peer may have received it; `expired`
    /// once `deadline` has passed.
    public func wait(
        _ claim: ClaimedDelivery, verdict: Verdict?, result: APNsSendResult?, until retryAt: Double, deadline: Double,
        at now: Double
    ) -> DeliveryUpdate {
        let reached = result.map { $0.status != nil || $0.mayHaveReachedPeer } ?? false
        let attempts = claim.attempts + (reached ? 1 : 0)
        let peer = claim.delivery.environment == .fcm ? "FCM" : "APNs"
        let why = result.map { $0.transportError ?? "\(peer) answered \($0.status ?? 0) \($0.reason?.rawValue ?? "")" }
        if retryAt >= deadline || now >= deadline {
            return DeliveryUpdate(
                id: claim.id, state: .expired, attempts: attempts, status: result?.status,
                reason: result?.reason?.rawValue,
                error: "\(peer) was unreachable until the push's deadline passed"
                    + (why.map { " (last: \($0))" } ?? ""),
                outcome: verdict?.outcome, rule: verdict?.rule, finishedAt: now)
        }
        return DeliveryUpdate(
            id: claim.id, state: .pending, attempts: attempts, nextAttemptAt: retryAt, status: result?.status,
            reason: result?.reason?.rawValue,
            error: why.map { "waiting for \(peer): \($0)" } ?? "waiting for \(peer)",
            outcome: verdict?.outcome, rule: verdict?.rule)
    }

    /// How a waiting delivery's error begins (`waiting for FCM` for an Android registration's).
    public static let waitingPrefix = "waiting for APNs"

    /// True for an update that puts a delivery back to wait for APNs or FCM (`wait`), not an attempt's result.
    public static func isWait(_ update: DeliveryUpdate) -> Bool {
        guard update.state == .pending, let error = update.error else { return false }
        return error.hasPrefix(waitingPrefix) || error.hasPrefix("waiting for FCM")
    }

    /// A push and a device (hashed as two strings, without joining them into a third).
    private struct GroupKey: Hashable {
        var pushId: String
        var deviceId: String
    }

    /// Claimed deliveries grouped by (push, device), in the order they were claimed: a group is enriched once and
    /// sent to each of the device's registrations.
    public static func groups(_ claimed: [ClaimedDelivery]) -> [[ClaimedDelivery]] {
        var groups: [[ClaimedDelivery]] = []
        groups.reserveCapacity(claimed.count)
        var positions: [GroupKey: Int] = Dictionary(minimumCapacity: claimed.count)
        for claim in claimed {
            let key = GroupKey(pushId: claim.pushId, deviceId: claim.delivery.deviceId)
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
        if (push.expiration?.epochSeconds ?? 0) == 0,
            now >= deadline(of: push, scheduledAt: claims.first?.delivery.scheduledAt)
        {
            return .settle(
                claims.map {
                    DeliveryUpdate(
                        id: $0.id, state: .expired, attempts: $0.attempts,
                        error:
                            "not sent within the maximum age of a push without apns-expiration "
                            + "(\(Int(maximumAge)) s, ENRICH_DELIVERY_MAX_AGE)",
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
        // An FCM registration's request is turned into an FCM message by its sender, which checks FCM's rules
        // (Apple's token format and header rules are not FCM's).
        if claim.delivery.environment == .fcm { return .send(request) }
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
        if claim.delivery.environment == .fcm { return answerFCM(claim, result: result, verdict: verdict, at: now) }
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
