import APNsClient
import APNsCore
import Foundation
import MockAPNs
import NIOCore
import TestSupport
import Testing

/// 10,000 tokens, each distinct, so the mock's record shows whether every push was accepted exactly once.
private let tokens = (0..<10_000).map { String(format: "%064x", $0) }
private let requests = tokens.map { push(token: $0) }

/// Sends the 10,000 pushes and returns the results with the time taken.
private func sendAll(_ sender: APNsSender, concurrency: Int = 16) async -> ([APNsSendResult], Duration) {
    let started = ContinuousClock.now
    let results = await sender.send(requests, concurrency: concurrency)
    return (results, ContinuousClock.now - started)
}

/// The time the 10,000 pushes take with no churn, measured once for the tests that compare against it.
private actor CalmBaseline {
    static let shared = CalmBaseline()
    private var measured: Duration?

    func elapsed() async throws -> Duration {
        if let measured { return measured }
        let elapsed = try await withMock { base, state in
            try await withSender(try makeSender(base)) { sender in
                let (results, elapsed) = await sendAll(sender)
                expectEachAcceptedOnce(results, state)
                return elapsed
            }
        }
        measured = elapsed
        return elapsed
    }
}

/// Every token accepted exactly once by the mock, and every result a 200.
private func expectEachAcceptedOnce(_ results: [APNsSendResult], _ state: MockAPNsState, count: Int = tokens.count) {
    #expect(results.count == count)
    #expect(results.filter { $0.status != 200 }.isEmpty, "failures: \(results.filter { $0.status != 200 }.prefix(3))")
    let accepted = state.receivedPushes.filter { $0.status == 200 }.map(\.deviceToken)
    #expect(accepted.count == count)
    #expect(Set(accepted) == Set(tokens.prefix(count)))
}

// Serialized: the timing comparisons should not share the machine with each other.
@Suite("Sender through connection churn (mock APNs playing GOAWAY, closes, stream limits, silence)", .serialized)
struct ConnectionChurnTests {
    @Test("10,000 pushes through 10 GOAWAYs: each accepted once, none failed or retried, within twice the calm time")
    func throughGoAways() async throws {
        let calm = try await CalmBaseline.shared.elapsed()
        var behaviour = ConnectionBehaviour()
        behaviour.goAwayAfter = 1000
        try await withMock(behaviour: behaviour) { base, state in
            try await withSender(try makeSender(base)) { sender in
                let (results, elapsed) = await sendAll(sender)
                expectEachAcceptedOnce(results, state)
                // A GOAWAY costs no attempt: nothing was lost, nothing sent twice.
                #expect(results.allSatisfy { $0.attempts == 1 })
                #expect(state.connectionEvents.goAways >= 10)
                let statistics = await sender.statistics()
                #expect(statistics.drained >= 9)
                #expect(statistics.lostWithConnection == 0)
                #expect(elapsed < calm * 2 + .seconds(1), "calm \(calm), through GOAWAYs \(elapsed)")
            }
        }
    }

    @Test("a GOAWAY whose last stream id is below streams in flight: those are sent again at once, elsewhere")
    func goAwayBelowInFlight() async throws {
        var behaviour = ConnectionBehaviour()
        behaviour.goAwayAfter = 500
        // Fewer than the 16 pushes the sender keeps in flight, so they are all on the wire when the GOAWAY comes.
        behaviour.goAwayHeldBack = 10
        try await withMock(behaviour: behaviour) { base, state in
            try await withSender(try makeSender(base)) { sender in
                let batch = Array(requests.prefix(3000))
                let results = await sender.send(batch, concurrency: 16)
                #expect(results.allSatisfy { $0.status == 200 && $0.attempts == 1 })
                let accepted = state.receivedPushes.filter { $0.status == 200 }.map(\.deviceToken)
                #expect(accepted.count == 3000)
                #expect(Set(accepted) == Set(batch.map(\.deviceToken)))
                // The 10 held back on each of the 6 connections that reached the GOAWAY, at least.
                #expect(state.connectionEvents.goAways >= 5)
                #expect(await sender.statistics().resentUnprocessed >= 5 * 10)
            }
        }
    }

    @Test("10,000 pushes through abrupt closes: lost pushes go again as counted retries, none fails")
    func throughAbruptCloses() async throws {
        let calm = try await CalmBaseline.shared.elapsed()
        var behaviour = ConnectionBehaviour()
        behaviour.closeAfter = 1000
        try await withMock(behaviour: behaviour) { base, state in
            try await withSender(try makeSender(base)) { sender in
                let (results, elapsed) = await sendAll(sender)
                expectEachAcceptedOnce(results, state)
                #expect(state.connectionEvents.abruptCloses >= 9)
                let statistics = await sender.statistics()
                // Pushes in flight at a close may have been delivered: they are reported as retried.
                #expect(statistics.lostWithConnection > 0)
                #expect(results.filter { $0.attempts > 1 }.count == statistics.lostWithConnection)
                #expect(elapsed < calm * 2 + .seconds(1), "calm \(calm), through closes \(elapsed)")
            }
        }
    }

    @Test("the stream limit is obeyed as the server lowers it to 1 and raises it again")
    func streamLimitChanges() async throws {
        var behaviour = ConnectionBehaviour()
        behaviour.maxConcurrentStreams = 50
        behaviour.streamLimitChanges = [.init(after: 300, limit: 1), .init(after: 500, limit: 100)]
        try await withMock(behaviour: behaviour) { base, state in
            try await withSender(try makeSender(base)) { sender in
                let batch = Array(requests.prefix(2000))
                let results = await sender.send(batch, concurrency: 200)
                #expect(results.allSatisfy { $0.status == 200 && $0.attempts == 1 })
                #expect(state.receivedCount == 2000)
                // Had the client opened streams past the limit, the server would have refused them.
                #expect(await sender.statistics().resentUnprocessed == 0)
            }
        }
    }

    @Test("four connections over two event loops (two shards of two): every push answered once, results in input order")
    func shardedOverLoops() async throws {
        try await withMock { base, state in
            let sender = try makeSender(base, connections: 4, eventLoops: 2)
            #expect(sender.shardCount == 2)
            try await withSender(sender) { sender in
                let batch = Array(requests.prefix(3001))
                let results = await sender.send(batch, concurrency: 400)
                #expect(results.map(\.deviceToken) == batch.map(\.deviceToken))
                expectEachAcceptedOnce(results, state, count: batch.count)
                #expect(await sender.statistics().connectionsOpened == 4)
                #expect(state.connectionEvents.accepted == 4)
                // A lone push goes to the shards in turn and is answered like any other.
                for token in ["aa", "bb", "cc"] {
                    let one = await sender.send(push(token: String(repeating: token, count: 32)))
                    #expect(one.status == 200)
                }
            }
        }
        // More loops than connections: one loop per connection, never an idle shard.
        try await withMock { base, _ in
            let one = try makeSender(base, connections: 1, eventLoops: 8)
            let three = try makeSender(base, connections: 3, eventLoops: 0)
            #expect(one.shardCount == 1)
            #expect(three.shardCount == min(3, System.coreCount))
            try await one.shutdown()
            try await three.shutdown()
        }
    }

    @Test("a server that stops answering is caught by an unanswered PING; its pushes go again on a new connection")
    func silentPeer() async throws {
        var behaviour = ConnectionBehaviour()
        behaviour.silentAfter = 100
        try await withMock(behaviour: behaviour) { base, state in
            let sender = try makeSender(
                base, retry: RetryPolicy(maxAttempts: 5, baseDelay: 0.05, maxDelay: 0.2), requestTimeout: .seconds(30),
                pingInterval: .milliseconds(200), pingTimeout: .milliseconds(300))
            try await withSender(sender) { sender in
                let started = ContinuousClock.now
                let results = await sender.send(Array(requests.prefix(300)), concurrency: 50)
                #expect(results.allSatisfy { $0.status == 200 })
                let statistics = await sender.statistics()
                #expect(statistics.unansweredPings >= 1)
                #expect(state.connectionEvents.silenced >= 1)
                // Found by the PING, long before the 30 s request timeout.
                #expect(ContinuousClock.now - started < .seconds(10))
            }
        }
    }
}

@Suite("Sender against nginx as an APNs-like endpoint (a server nobody here wrote)")
struct NginxTests {
    @Test("3,000 pushes, concurrency 100, nginx closing each connection after 1,000 requests: none fails, no stall")
    func withGoAways() async throws {
        try await withNginxAPNs(keepaliveRequests: 1000) { base in
            try await withSender(try makeSender(base, retry: RetryPolicy(maxAttempts: 1))) { sender in
                let started = ContinuousClock.now
                let results = await sender.send(Array(requests.prefix(3000)), concurrency: 100)
                #expect(results.filter { $0.status != 200 }.isEmpty, "\(results.filter { $0.status != 200 }.prefix(3))")
                #expect(results.allSatisfy { $0.apnsID == nil || !$0.apnsID!.isEmpty })
                #expect(await sender.statistics().drained >= 2)
                #expect(ContinuousClock.now - started < .seconds(20))
            }
        }
    }

    @Test("3,000 pushes, concurrency 100, no GOAWAY: the tail is answered, no stall")
    func withoutGoAways() async throws {
        try await withNginxAPNs(keepaliveRequests: 1_000_000) { base in
            try await withSender(try makeSender(base, retry: RetryPolicy(maxAttempts: 1))) { sender in
                let started = ContinuousClock.now
                let results = await sender.send(Array(requests.prefix(3000)), concurrency: 100)
                #expect(results.filter { $0.status != 200 }.isEmpty, "\(results.filter { $0.status != 200 }.prefix(3))")
                #expect(await sender.statistics().connectionsOpened == 1)
                #expect(ContinuousClock.now - started < .seconds(20))
            }
        }
    }
}
