import APNsCore
import Delivery
import Essentials
import Testing

/// The planner's decisions, synchronously: no storage, no clock, no socket.
@Suite("Delivery planner")
struct DeliveryPlannerTests {
    static let planner = DeliveryPlanner(retry: RetryPolicy(maxAttempts: 5, baseDelay: 1, maxDelay: 300))
    static let verdict = DeliveryPlanner.Verdict(outcome: "enriched", rule: "nearest_poi")
    static let token = String(repeating: "ab", count: 32)

    static func claim(
        _ id: Int64, push: String = "p1", device: String = "d1", attempts: Int = 0,
        environment: APNsEnvironmentName = .sandbox
    ) -> ClaimedDelivery {
        ClaimedDelivery(
            id: id, pushId: push,
            delivery: NewDelivery(
                deviceId: device, token: token, topic: "com.example.app", environment: environment,
                apnsId: "123e4567-e89b-12d3-a456-42661417400\(id % 10)"),
            attempts: attempts)
    }

    static func push(
        pushType: PushType = .alert, priority: Int? = nil, expiration: Int64? = nil, collapseId: String? = nil,
        topic: String? = nil
    ) -> PushDefinition {
        PushDefinition(
            id: "p1", createdAt: 1_000, payload: .object(["aps": .object([:])]), pushType: pushType,
            priority: priority.flatMap(APNsPriority.init(rawValue:)),
            expiration: expiration.flatMap(APNsExpiration.init(epochSeconds:)), collapseId: collapseId, topic: topic,
            deviceIds: ["d1"])
    }

    static func result(
        _ status: Int?, _ reason: APNsReason? = nil, timestamp: Int64? = nil, attempts: Int = 1,
        transportError: String? = nil
    ) -> APNsSendResult {
        APNsSendResult(
            deviceToken: token, status: status, reason: reason, apnsID: nil, timestamp: timestamp, attempts: attempts,
            transportError: transportError)
    }

    @Test("claims are grouped by push and device, in claim order, so each device is enriched once")
    func grouping() {
        let claims = [
            Self.claim(1, device: "a"), Self.claim(2, device: "b"),
            Self.claim(3, device: "a", environment: .production),
            Self.claim(4, push: "p2", device: "a"),
        ]
        let groups = DeliveryPlanner.groups(claims)
        #expect(groups.map { $0.map(\.id) } == [[1, 3], [2], [4]])
    }

    @Test("a missing push record fails its claims; an expired push expires them without an attempt")
    func settledBeforeSending() {
        let claims = [Self.claim(1, attempts: 2), Self.claim(2)]
        guard case .settle(let missing) = Self.planner.decide(claims, push: nil, now: 2_000) else {
            Issue.record("a push with no record was sent")
            return
        }
        #expect(missing.map(\.state) == [.failed, .failed])
        #expect(missing.map(\.attempts) == [2, 0])
        #expect(missing.allSatisfy { $0.error == "the push record is missing" && $0.finishedAt == 2_000 })
        // apns-expiration 1999 is before 2000.5 (compared on whole seconds): expired; 2000 is not yet.
        guard case .settle(let expired) = Self.planner.decide(claims, push: Self.push(expiration: 1_999), now: 2_000.5)
        else {
            Issue.record("an expired push was sent")
            return
        }
        #expect(expired.map(\.state) == [.expired, .expired])
        #expect(
            Self.planner.decide(claims, push: Self.push(expiration: 2_000), now: 2_000.5)
                == .send(Self.push(expiration: 2_000)))
        // 0 means "deliver once, do not store": no instant passes, but like a push without apns-expiration it
        // waits for APNs no longer than the maximum age (3600 s here) after it was made (at 1000).
        #expect(
            Self.planner.decide(claims, push: Self.push(expiration: 0), now: 4_599) == .send(Self.push(expiration: 0)))
        guard case .settle(let old) = Self.planner.decide(claims, push: Self.push(expiration: 0), now: 4_600) else {
            Issue.record("a push older than the maximum age was sent")
            return
        }
        #expect(old.map(\.state) == [.expired, .expired])
        #expect(old.map(\.attempts) == [2, 0])
        #expect(old.allSatisfy { $0.error?.contains("ENRICH_DELIVERY_MAX_AGE") == true })
    }

    @Test(
        "an outage (no answer, 500, 503) waits for the peer: no attempt unless the peer may have it; expired past the deadline"
    )
    func outageWaits() {
        let planner = Self.planner
        let refused = APNsSendResult(
            deviceToken: "t", status: nil, reason: nil, apnsID: nil, timestamp: nil, attempts: 0,
            transportError: "cannot connect: connection refused")
        var lost = refused
        lost.transportError = "the connection closed before the answer"
        lost.attempts = 1
        lost.mayHaveReachedPeer = true
        let unavailable = APNsSendResult(
            deviceToken: "t", status: 503, reason: .serviceUnavailable, apnsID: nil, timestamp: nil, attempts: 1,
            transportError: nil)
        let notFound = APNsSendResult(
            deviceToken: "t", status: 410, reason: .unregistered, apnsID: nil, timestamp: nil, attempts: 1,
            transportError: nil)
        #expect([refused, lost, unavailable].allSatisfy(DeliveryPlanner.isOutage))
        #expect(!DeliveryPlanner.isOutage(notFound))

        let claim = Self.claim(1, attempts: 1)
        let waiting = planner.wait(claim, verdict: Self.verdict, result: refused, until: 105, deadline: 200, at: 100)
        #expect(waiting.state == .pending)
        #expect(waiting.attempts == 1)  // never reached the peer: no attempt used
        #expect(waiting.nextAttemptAt == 105)
        #expect(DeliveryPlanner.isWait(waiting))
        let resent = planner.wait(claim, verdict: Self.verdict, result: lost, until: 105, deadline: 200, at: 100)
        #expect(resent.state == .pending)
        #expect(resent.attempts == 2)  // it may have been delivered: sent again, and counted
        let answered = planner.wait(
            claim, verdict: Self.verdict, result: unavailable, until: 105, deadline: 200, at: 100)
        #expect(answered.attempts == 2)
        #expect(answered.status == 503)
        // The next probe would come after the deadline: expired now, never failed.
        let late = planner.wait(claim, verdict: Self.verdict, result: refused, until: 250, deadline: 200, at: 100)
        #expect(late.state == .expired)
        #expect(late.finishedAt == 100)
        #expect(!DeliveryPlanner.isWait(late))
        // The deadline: apns-expiration (an instant) itself, else the maximum age after the push was made.
        #expect(planner.deadline(of: Self.push(expiration: 5_000)) == 5_001)
        #expect(planner.deadline(of: Self.push(expiration: nil)) == 1_000 + 3_600)
    }

    @Test("the request carries the push's typed headers, the registration's topic with the type's suffix, the apns-id")
    func request() {
        let prepared = Self.planner.prepare(
            Self.claim(7), push: Self.push(pushType: .voip, priority: 10, expiration: 0, collapseId: "c"),
            payload: Array(#"{"aps":{}}"#.utf8), verdict: Self.verdict, now: 1)
        guard case .send(let request) = prepared else {
            Issue.record("not sent: \(prepared)")
            return
        }
        #expect(request.topic == "com.example.app.voip")
        #expect(request.pushType == .voip)
        #expect(request.priority == .immediately)
        #expect(request.expiration == .immediately)
        // As written on the wire.
        #expect(request.wire.pushType == "voip")
        #expect(request.wire.priority == "10")
        #expect(request.wire.expiration == "0")
        #expect(request.collapseID == "c")
        #expect(request.apnsID == "123e4567-e89b-12d3-a456-426614174007")
        #expect(request.deviceToken == Self.token)
    }

    @Test("a request that breaks a header rule is settled as Apple would answer it, and not sent")
    func refusedBeforeSending() {
        let background = Self.planner.prepare(
            Self.claim(1, attempts: 1), push: Self.push(pushType: .background, priority: 10),
            payload: Array(#"{"aps":{"content-available":1}}"#.utf8), verdict: Self.verdict, now: 5)
        #expect(
            background
                == .settle(
                    DeliveryUpdate(
                        id: 1, state: .failed, attempts: 1, status: 400, reason: "BadPriority",
                        error: "background pushes must use apns-priority 5, got 10", outcome: "enriched",
                        rule: "nearest_poi", finishedAt: 5)))
        // A registration's topic that, with the push type's suffix, no longer fits a header.
        let long = Self.planner.prepare(
            Self.claim(2), push: Self.push(pushType: .liveactivity, topic: String(repeating: "a", count: 240)),
            payload: Array(#"{"aps":{}}"#.utf8), verdict: Self.verdict, now: 5)
        guard case .settle(let update) = long else {
            Issue.record("an over-long topic was sent")
            return
        }
        #expect(update.reason == "BadTopic")
        #expect(update.state == .failed)
    }

    @Test("answers: 200 delivered; 429, 5xx and no answer retried with backoff until the last attempt")
    func retries() {
        let delivered = Self.planner.answer(Self.claim(1), result: Self.result(200), verdict: Self.verdict, at: 10)
        #expect(delivered.update.state == .delivered)
        #expect(delivered.update.attempts == 1)
        #expect(delivered.update.finishedAt == 10)
        #expect(delivered.deactivation == nil)
        // Backoff 1, 2, 4, 8 s after attempts 1 to 4; the 5th failure is final.
        for (before, delay) in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0)] {
            for result in [
                Self.result(429, .tooManyRequests), Self.result(503, .serviceUnavailable),
                Self.result(nil, transportError: "connection reset"),
            ] {
                let answer = Self.planner.answer(
                    Self.claim(1, attempts: before), result: result, verdict: Self.verdict, at: 100)
                #expect(answer.update.state == .pending)
                #expect(answer.update.attempts == before + 1)
                #expect(answer.update.nextAttemptAt == 100 + delay)
                #expect(answer.update.finishedAt == nil)
            }
        }
        let last = Self.planner.answer(
            Self.claim(1, attempts: 4), result: Self.result(500, .internalServerError), verdict: Self.verdict, at: 100)
        #expect(last.update.state == .failed)
        #expect(last.update.attempts == 5)
        #expect(last.update.nextAttemptAt == nil)
        // The cap holds however long the backoff would grow.
        let capped = DeliveryPlanner(retry: RetryPolicy(maxAttempts: 50, baseDelay: 1, maxDelay: 300))
        let late = capped.answer(Self.claim(1, attempts: 20), result: Self.result(503), verdict: Self.verdict, at: 0)
        #expect(late.update.nextAttemptAt == 300)
    }

    @Test("answers: 4xx are final; a refusal before the wire counts as an attempt")
    func finalRefusals() {
        for (status, reason) in [(400, APNsReason.badPriority), (403, .invalidProviderToken), (413, .payloadTooLarge)] {
            let answer = Self.planner.answer(
                Self.claim(1), result: Self.result(status, reason), verdict: Self.verdict, at: 1)
            #expect(answer.update.state == .failed)
            #expect(answer.update.reason == reason.rawValue)
            #expect(answer.deactivation == nil)
        }
        let local = Self.planner.answer(
            Self.claim(1, attempts: 2), result: Self.result(400, .badTopic, attempts: 0, transportError: "not sent: x"),
            verdict: Self.verdict, at: 1)
        #expect(local.update.attempts == 3)
        #expect(local.update.error == "not sent: x")
    }

    @Test("tokens: 410 deactivates from APNs's time unless registered since; 400 only for that topic and environment")
    func tokenHygiene() {
        let gone = Self.planner.answer(
            Self.claim(1), result: Self.result(410, .unregistered, timestamp: 1_700_000_000_123), verdict: Self.verdict,
            at: 1_800_000_000)
        #expect(gone.update.state == .failed)
        #expect(gone.update.apnsTimestamp == 1_700_000_000_123)
        #expect(
            gone.deactivation
                == TokenDeactivation(
                    deviceId: "d1", token: Self.token, reason: "Unregistered", invalidatedAt: 1_700_000_000.123,
                    unlessRegisteredAfter: 1_700_000_000.123))
        let expired = Self.planner.answer(
            Self.claim(1), result: Self.result(410, .expiredToken), verdict: Self.verdict, at: 5)
        #expect(expired.deactivation?.invalidatedAt == 5)
        #expect(expired.deactivation?.unlessRegisteredAfter == nil)
        for reason in [APNsReason.badDeviceToken, .deviceTokenNotForTopic] {
            let wrong = Self.planner.answer(
                Self.claim(1, environment: .production), result: Self.result(400, reason), verdict: Self.verdict,
                at: 9)
            #expect(
                wrong.deactivation
                    == TokenDeactivation(
                        deviceId: "d1", token: Self.token, reason: reason.rawValue, invalidatedAt: 9,
                        onlyFor: ("com.example.app", .production)))
        }
        // The reasons that invalidate a token are APNsReason's, and no others deactivate one.
        #expect(
            Set(
                [
                    APNsReason.unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic, .badTopic,
                    .forbidden,
                ]
                .filter(\.invalidatesToken).map(\.rawValue))
                == ["Unregistered", "ExpiredToken", "BadDeviceToken", "DeviceTokenNotForTopic"])
    }
}
