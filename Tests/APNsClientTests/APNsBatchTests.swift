import APNsCore
import Foundation
import MockAPNs
import NIOCore
import Synchronization
import TestSupport
import Testing

@testable import APNsClient

/// Stands in for the HTTP/2 client: answers from a table and records what it was asked to send.
final class RecordingSender: APNsBatchSending {
    let answers: @Sendable (APNsRequest) -> APNsSendResult
    private let sent = Mutex<[[APNsRequest]]>([])

    init(answers: @escaping @Sendable (APNsRequest) -> APNsSendResult) { self.answers = answers }

    var batches: [[APNsRequest]] { sent.withLock { $0 } }

    func send(_ requests: [APNsRequest], concurrency: Int, progress: (@Sendable (Int) -> Void)?) async
        -> [APNsSendResult]
    {
        sent.withLock { $0.append(requests) }
        for done in 1...max(1, requests.count) where !requests.isEmpty { progress?(done) }
        return requests.map(answers)
    }

    func shutdown() async throws {}
}

private func accepted(_ request: APNsRequest) -> APNsSendResult {
    APNsSendResult(
        deviceToken: request.deviceToken, status: 200, reason: nil, apnsID: "id-\(request.deviceToken.prefix(4))",
        timestamp: nil, attempts: 1, transportError: nil)
}

private let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
private let good = (0..<4).map { String(format: "%064x", $0 + 1) }

@Suite("APNsBatch: validation once, local refusals, merged results (no network)")
struct APNsBatchTests {
    @Test("headers and payload shared by every token are checked once, before anything is sent")
    func sharedProblemStopsTheBatch() throws {
        #expect(throws: APNsValidator.Violation.self) {
            try APNsBatch(payload: sizedPayload(4097), tokens: good, bundle: "com.example.app", pushType: .alert)
        }
        do {
            _ = try APNsBatch(
                payload: payload, tokens: good, bundle: "com.example.app", pushType: .background, priority: .immediately
            )
            Issue.record("background with priority 10 must be refused")
        } catch {
            #expect(error.reason == .badPriority)
        }
        // The voip limit is 5120: the same 4097 bytes pass as voip.
        let voip = try APNsBatch(payload: sizedPayload(4097), tokens: good, bundle: "com.example.app", pushType: .voip)
        #expect(voip.topic == "com.example.app.voip")
        #expect(voip.payloadSize == 4097)
    }

    @Test("malformed tokens are refused locally, never sent, and merged back in input order")
    func localRefusalsMerged() async throws {
        let tokens = [good[0], "zz-not-hex", good[1], String(good[2].prefix(63)), good[3]]
        let batch = try APNsBatch(payload: payload, tokens: tokens, bundle: "com.example.app", pushType: .alert)
        #expect(batch.sendableCount == 3)
        #expect(Set(batch.localRefusals.keys) == [1, 3])
        let sender = RecordingSender(answers: accepted)
        let progress = Mutex(0)
        let results = await batch.send(with: sender, concurrency: 8) { done in progress.withLock { $0 = done } }
        #expect(sender.batches.count == 1)
        #expect(sender.batches[0].map(\.deviceToken) == [good[0], good[1], good[3]])
        #expect(results.map(\.deviceToken) == tokens)
        #expect(results.map(\.status) == [200, 400, 200, 400, 200])
        #expect(results[1].reason == .badDeviceToken)
        #expect(results[1].attempts == 0)
        #expect(results[1].transportError?.contains("64 to 200 digits") == true)
        #expect(results[4].apnsID == "id-0000")
        #expect(progress.withLock { $0 } == 3)
    }

    @Test("a dry run reports every token and sends nothing")
    func dryRun() throws {
        let batch = try APNsBatch(
            payload: payload, tokens: [good[0], "abc"], bundle: "com.example.app", pushType: .alert,
            priority: .considerate)
        let report = batch.dryRunResults
        #expect(report.map(\.status) == [nil, 400])
        #expect(report.map(\.reason) == [nil, .badDeviceToken])
        #expect(report.allSatisfy { $0.attempts == 0 })
    }

    @Test("a sender that answers fewer results than requests leaves the rest reported as not sent")
    func shortAnswer() async throws {
        struct Lossy: APNsBatchSending {
            func send(_ requests: [APNsRequest], concurrency: Int, progress: (@Sendable (Int) -> Void)?) async
                -> [APNsSendResult]
            { requests.dropLast().map(accepted) }
            func shutdown() async throws {}
        }
        let batch = try APNsBatch(payload: payload, tokens: good, bundle: "com.example.app", pushType: .alert)
        let results = await batch.send(with: Lossy(), concurrency: 1)
        #expect(results.map(\.status) == [200, 200, 200, nil])
        #expect(results[3].transportError == "not sent")
    }

    @Test("every request of a batch shares one payload buffer: no copy per token or per attempt")
    func payloadSharedOnce() throws {
        let batch = try APNsBatch(payload: payload, tokens: good, bundle: "com.example.app", pushType: .alert)
        let buffers = APNsSender.payloadBuffers(batch.requests[...])
        let addresses = buffers.map { $0.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } }
        #expect(Set(addresses).count == 1)
        #expect(buffers[0].readableBytesView.elementsEqual(payload))
        // Requests with their own payloads get their own buffers.
        let other = [push(payload: payload), push(payload: Array(#"{"aps":{}}"#.utf8))]
        let separate = APNsSender.payloadBuffers(other[...]).map {
            $0.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        }
        #expect(Set(separate).count == 2)
    }
}

@Suite("Sender timeouts against the mock APNs")
struct SenderTimeoutTests {
    @Test("a request that gets no answer in time fails and resets its stream, so the server stops working on it")
    func timeoutResetsStream() async throws {
        try await withMock { base, state in
            state.script(FailureScript(status: 200, times: 1, delayMilliseconds: 3_000), for: token64)
            let sender = try makeSender(
                base, retry: RetryPolicy(maxAttempts: 1), requestTimeout: .milliseconds(300))
            try await withSender(sender) { sender in
                let result = await sender.send(push())
                #expect(result.status == nil)
                #expect(result.transportError == "no answer in time (the stream was reset)")
                // The mock sees the stream closed before its delayed answer.
                var waited = 0
                while state.abandonedStreams == 0, waited < 40 {
                    try await Task.sleep(for: .milliseconds(50))
                    waited += 1
                }
                #expect(state.abandonedStreams == 1)
                // The connection still works for the next push.
                #expect(await sender.send(push()).status == 200)
            }
        }
    }
}
