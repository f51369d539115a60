public import APNsCore
import FCMCore

// An FCM registration's answers, decided with FCM's rules (`FCMAnswerKind`). Its sender hands them over in the
// shape every sender uses: the HTTP status, FCM's error code (or Google's status when there is none) as the
// reason, Google's message as the error, and `Retry-After`.
extension DeliveryPlanner {
    /// True when the answer refuses the credential rather than the device: APNs's 403 InvalidProviderToken or
    /// ExpiredProviderToken, or FCM's 401 UNAUTHENTICATED (a service account the token endpoint refused, or an
    /// access token FCM refused twice) and 403 PERMISSION_DENIED (an account without FCM rights on the
    /// project). Its deliveries wait for the credential to be fixed, like an outage, rather than fail one by one.
    public static func refusesCredential(_ result: APNsSendResult) -> Bool {
        switch (result.status, result.reason?.rawValue) {
        case (403?, APNsReason.invalidProviderToken.rawValue?), (403?, APNsReason.expiredProviderToken.rawValue?):
            true
        case (401?, "UNAUTHENTICATED"?), (403?, "PERMISSION_DENIED"?): true
        // FCM's 404 without UNREGISTERED (Google's NOT_FOUND, or not Google's body at all): a wrong FCM URL or
        // project, which every delivery with this credential would meet. (APNs's 404 always has its reason.)
        case (404?, "NOT_FOUND"?), (404?, nil): true
        default: false
        }
    }

    /// The update for one FCM answer: 200 is delivered; QUOTA_EXCEEDED, UNAVAILABLE, INTERNAL and answerless
    /// attempts are pending again after the backoff or `Retry-After`, whichever is longer, until the last attempt;
    /// UNREGISTERED and an INVALID_ARGUMENT about the token fail the delivery and deactivate the registration
    /// (unless it was registered again after the answer); anything else (SENDER_ID_MISMATCH, a message FCM
    /// refused) fails it.
    func answerFCM(
        _ claim: ClaimedDelivery, result: APNsSendResult, verdict: Verdict, at now: Double
    ) -> (update: DeliveryUpdate, deactivation: TokenDeactivation?) {
        let attempts = claim.attempts + max(1, result.attempts)
        var update = DeliveryUpdate(
            id: claim.id, state: .failed, attempts: attempts, status: result.status, reason: result.reason?.rawValue,
            error: result.transportError, outcome: verdict.outcome, rule: verdict.rule, finishedAt: now)
        let kind: FCMAnswerKind
        if let status = result.status {
            // The sender says when FCM called the token itself invalid (`tokenInvalid`); Google's message text is
            // not read for it (a refusal's text may quote the payload).
            let body = FCMErrorBody(
                code: status, message: "", status: result.reason?.rawValue ?? "",
                errorCode: result.reason.map { FCMErrorCode(rawValue: $0.rawValue) },
                fieldViolations: result.tokenInvalid ? ["message.token"] : [])
            kind = FCMAnswerKind.classify(status: status, body: body)
        } else {
            kind = .retry
        }
        switch kind {
        case .sent:
            update.state = .delivered
            update.error = nil
            return (update, nil)
        case .retry, .reauthenticate:
            guard attempts < retry.maxAttempts else { return (update, nil) }
            update.state = .pending
            update.finishedAt = nil
            update.nextAttemptAt = now + max(retry.backoff(afterAttempt: attempts), result.retryAfter ?? 0)
            return (update, nil)
        case .deactivate:
            let delivery = claim.delivery
            return (
                update,
                TokenDeactivation(
                    deviceId: delivery.deviceId, token: delivery.token,
                    reason: result.reason?.rawValue ?? "UNREGISTERED",
                    invalidatedAt: now, unlessRegisteredAfter: now)
            )
        case .misconfigured, .refused:
            return (update, nil)
        }
    }
}
