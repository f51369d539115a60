import EnrichmentRuntime
import Foundation
import Testing

@Suite("withAbandoningTimeout")
struct AbandoningTimeoutTests {
    @TaskLocal static var marker: String?

    @Test("a body that never ends and ignores cancellation: nil at the bound, not later")
    func neverEnds() async throws {
        let started = ContinuousClock.now
        let value: Int? = try await withAbandoningTimeout(.milliseconds(300)) {
            // Waits 120 s whatever happens: cancellation does not end it.
            await withCheckedContinuation { continuation in
                DispatchQueue.global().asyncAfter(deadline: .now() + 120) { continuation.resume() }
            }
            return 1
        }
        let took = ContinuousClock.now - started
        #expect(value == nil)
        // Far below the body's 120 s (the bound is 0.3 s; a machine busy with other tests may be slow to wake).
        #expect(took >= .milliseconds(300) && took < .seconds(60), "returned after \(took)")
    }

    @Test("a body that ends in time: its value, or its error, and the task's locals reach it")
    func endsInTime() async throws {
        let value = try await Self.$marker.withValue("app-1") {
            try await withAbandoningTimeout(.seconds(10)) { Self.marker }
        }
        #expect(value == "app-1")
        struct Failed: Error {}
        await #expect(throws: Failed.self) {
            _ = try await withAbandoningTimeout(.seconds(10)) { () async throws -> Int in throw Failed() }
        }
    }

    @Test("a cancelled caller cancels the body")
    func cancelledCaller() async throws {
        let task = Task {
            try await withAbandoningTimeout(.seconds(20)) { () async throws -> Bool in
                try await Task.sleep(for: .seconds(15))
                return true
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        let started = ContinuousClock.now
        await #expect(throws: CancellationError.self) { _ = try await task.value }
        #expect(ContinuousClock.now - started < .seconds(5))
    }
}
