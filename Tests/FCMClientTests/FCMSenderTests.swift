import Essentials
import FCMClient
import FCMCore
import Foundation
import MockFCM
import NIOCore
import Synchronization
import TestSupport
import Testing

/// A sender for the mock (or any local FCM) trusting the throwaway CA, with quick retries.
func makeFCMSender(
    _ base: String, account: FCMServiceAccount? = nil, clock: any WallClock = SystemWallClock(),
    attempts: Int = 3
) throws -> FCMSender {
    var configuration = FCMSenderConfiguration(baseURL: base, additionalTrustRootsPEM: localCAPEM)
    configuration.retry = FCMRetryPolicy(
        maximumAttempts: attempts, initialBackoff: 0.01, maximumBackoff: 0.05, quotaBackoff: 0.01)
    configuration.connectTimeout = .seconds(1)
    return try FCMSender(account: account ?? fcmAccount(base: base), configuration: configuration, clock: clock)
}

func notification(_ token: String, body: String = "Hello") -> FCMMessage {
    FCMMessage(token: token, notification: .init(title: "T", body: body), data: ["k": "v"])
}

final class Collected: Sendable {
    let results = Mutex<[Int: FCMSendResult]>([:])
    func add(_ index: Int, _ result: FCMSendResult) { results.withLock { $0[index] = result } }
    var all: [Int: FCMSendResult] { results.withLock { $0 } }
}

@Suite("FCM sender against the local FCM (HTTP/2 + TLS)")
struct FCMSenderTests {
    @Test("50 messages: each accepted and recorded byte for byte, one access token, one connection")
    func sendsAndRecords() async throws {
        try await withMockFCM { base, state in
            let sender = try makeFCMSender(base)
            let messages = (0..<50).map { notification(fcmToken($0), body: "n\($0)") }
            let collected = Collected()
            await sender.send(messages, concurrency: 50) { collected.add($0, $1) }
            try await sender.shutdown()
            let results = collected.all
            #expect(results.count == 50)
            #expect(results.values.allSatisfy { $0.succeeded && $0.attempts == 1 })
            #expect(results.values.allSatisfy { $0.name?.hasPrefix("projects/demo-project/messages/0:") == true })
            #expect(Set(state.received.map(\.body)) == Set(messages.map { $0.requestBody() }))
            let counts = state.counts
            #expect(counts.accepted == 50)
            #expect(counts.tokenRequests == 1)
            #expect(counts.connections == 1)
        }
    }

    @Test("many sends waiting for the first token cause one token request")
    func oneRefreshForManyWaiters() async throws {
        try await withMockFCM { base, state in
            state.setTokenDelay(milliseconds: 300)
            let sender = try makeFCMSender(base)
            let collected = Collected()
            await sender.send((0..<64).map { notification(fcmToken($0)) }, concurrency: 64) { collected.add($0, $1) }
            try await sender.shutdown()
            #expect(collected.all.values.filter(\.succeeded).count == 64)
            #expect(state.counts.tokenRequests == 1)
            #expect(await sender.tokens.refreshes == 1)
        }
    }

    @Test("the token is reused until five minutes before it expires, then refreshed once")
    func refreshBeforeExpiry() async throws {
        let clock = ManualClock()
        try await withMockFCM(clock: clock) { base, state in
            let sender = try makeFCMSender(base, clock: clock)
            #expect(await sender.send(notification(fcmToken(1))).succeeded)
            clock.advance(3000)
            #expect(await sender.send(notification(fcmToken(2))).succeeded)
            #expect(state.counts.tokenRequests == 1)
            // 3599 s of life, 300 s of margin: at 3300 s only 299 s are left, so the token is replaced.
            clock.advance(300)
            #expect(await sender.send(notification(fcmToken(3))).succeeded)
            #expect(await sender.send(notification(fcmToken(4))).succeeded)
            #expect(state.counts.tokenRequests == 2)
            try await sender.shutdown()
        }
    }

    @Test("a refresh that fails inside the margin leaves the current token in use until it expires")
    func refreshFailureKeepsCurrentToken() async throws {
        let clock = ManualClock()
        try await withMockFCM(clock: clock) { base, state in
            let sender = try makeFCMSender(base, clock: clock)
            #expect(await sender.send(notification(fcmToken(1))).succeeded)
            state.setRefuseTokens(true)
            // 3,400 s in: inside the 300 s margin, 199 s before the token expires.
            clock.advance(3400)
            let result = await sender.send(notification(fcmToken(2)))
            try await sender.shutdown()
            #expect(result.succeeded, "\(result)")
            #expect(state.counts.tokenRequests == 2)
            #expect(state.counts.accepted == 2)
        }
    }

    @Test("a refused service account is said as such and nothing is sent")
    func refusedCredential() async throws {
        try await withMockFCM { base, state in
            state.setRefuseTokens(true)
            let sender = try makeFCMSender(base)
            let result = await sender.send(notification(fcmToken(1)))
            try await sender.shutdown()
            #expect(!result.succeeded)
            #expect(result.kind == .misconfigured)
            #expect(result.attempts == 1)
            #expect(result.transportError?.contains("refused the service account (400 invalid_grant") == true)
            #expect(state.counts.messages == 0)
        }
    }

    @Test("an account the token endpoint does not know is refused too")
    func unknownAccount() async throws {
        try await withMockFCM { base, state in
            let stranger = fcmAccount(base: base, email: "stranger@elsewhere.iam.gserviceaccount.com")
            let sender = try makeFCMSender(base, account: stranger)
            let result = await sender.send(notification(fcmToken(1)))
            try await sender.shutdown()
            #expect(result.kind == .misconfigured)
            #expect(result.transportError?.contains("account not found") == true)
        }
    }

    @Test("each of FCM's answers is handled as Google documents it")
    func scriptedAnswers() async throws {
        try await withMockFCM { base, state in
            state.script(fcmToken(1), MockFCMScript(errorCode: .unregistered))
            state.script(fcmToken(2), MockFCMScript(errorCode: .quotaExceeded, times: 1, retryAfter: 0))
            state.script(fcmToken(3), MockFCMScript(errorCode: .unavailable))
            state.script(fcmToken(4), MockFCMScript(errorCode: .senderIDMismatch))
            state.script(fcmToken(5), MockFCMScript(errorCode: .invalidArgument))
            state.script(fcmToken(6), MockFCMScript(errorCode: .internal, times: 2))
            let sender = try makeFCMSender(base, attempts: 3)
            let collected = Collected()
            await sender.send((1...6).map { notification(fcmToken($0)) }, concurrency: 6) { collected.add($0 + 1, $1) }
            try await sender.shutdown()
            let results = collected.all
            #expect(results[1]?.status == 404)
            #expect(results[1]?.errorCode == .unregistered)
            #expect(results[1]?.kind == .deactivate)
            #expect(results[1]?.attempts == 1)
            #expect(results[2]?.succeeded == true)
            #expect(results[2]?.attempts == 2)
            #expect(results[3]?.status == 503)
            #expect(results[3]?.kind == .retry)
            #expect(results[3]?.attempts == 3)
            #expect(results[4]?.status == 403)
            #expect(results[4]?.kind == .misconfigured)
            #expect(results[4]?.attempts == 1)
            #expect(results[5]?.kind == .deactivate)
            #expect(results[5]?.attempts == 1)
            #expect(results[6]?.succeeded == true)
            #expect(results[6]?.attempts == 3)
        }
    }

    @Test("a revoked access token (401) is replaced once and the message goes")
    func revokedAccessToken() async throws {
        try await withMockFCM { base, state in
            let sender = try makeFCMSender(base)
            #expect(await sender.send(notification(fcmToken(1))).succeeded)
            state.revokeAccessTokens()
            let result = await sender.send(notification(fcmToken(2)))
            try await sender.shutdown()
            #expect(result.succeeded)
            #expect(result.attempts == 2)
            #expect(state.counts.tokenRequests == 2)
        }
    }

    @Test("an FCM that is not there is an answerless result after the attempts, not a throw")
    func unreachable() async throws {
        let port = try await freePort()
        let base = "https://127.0.0.1:\(port)"
        let sender = try makeFCMSender(base, attempts: 2)
        let result = await sender.send(notification(fcmToken(1)))
        try await sender.shutdown()
        #expect(result.status == nil)
        #expect(result.kind == .retry)
        #expect(result.attempts == 2)
        #expect(result.transportError?.contains("token endpoint") == true)
    }
}

@Suite("FCM sender against nginx (a server nobody here wrote)")
struct FCMSenderNginxTests {
    @Test("messages over nginx's HTTP/2 + TLS: 200s with names; 503 with Retry-After is retried to the limit")
    func nginx() async throws {
        try await withNginxFCM { base in
            let sender = try makeFCMSender(base)
            let collected = Collected()
            await sender.send((0..<20).map { notification(fcmToken($0)) }, concurrency: 20) { collected.add($0, $1) }
            #expect(collected.all.count == 20)
            #expect(
                collected.all.values.allSatisfy {
                    $0.succeeded && $0.name?.hasPrefix("projects/demo-project/messages/nginx-") == true
                })
            try await sender.shutdown()
            let down = try makeFCMSender(base, account: fcmAccount(base: base, project: "unavailable-project"))
            let result = await down.send(notification(fcmToken(1)))
            try await down.shutdown()
            #expect(result.status == 503)
            #expect(result.errorCode == .unavailable)
            #expect(result.attempts == 3)
        }
    }
}
