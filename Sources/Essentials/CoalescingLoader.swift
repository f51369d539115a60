import Synchronization

/// Reads by key, coalescing concurrent reads into batches: a read waits for the next batch to start (never for
/// one already under way), so what it returns was read after it was asked for, and many concurrent reads cost one
/// trip to storage instead of one each.
///
/// At most `maximumBatches` batches run at once; while they all run, new keys gather for the next one. Used where
/// every enrichment must see what any node has committed before it (the last fix on PostgreSQL): the batch a read
/// joins has not been sent yet, so the read sees every write acknowledged before it began.
public final class CoalescingLoader<Value: Sendable>: Sendable {
    public typealias Fetch = @Sendable ([String]) async throws -> [String: Value]

    private struct Waiter {
        var key: String
        var continuation: CheckedContinuation<Value?, any Error>
    }

    private struct State {
        var pending: [Waiter] = []
        var running = 0
    }

    private let fetch: Fetch
    private let maximumBatches: Int
    private let maximumKeys: Int
    private let state = Mutex(State())

    /// `fetch` reads many keys at once (a key it does not return has no value).
    public init(maximumBatches: Int = 4, maximumKeys: Int = 512, fetch: @escaping Fetch) {
        self.fetch = fetch
        self.maximumBatches = max(1, maximumBatches)
        self.maximumKeys = max(1, maximumKeys)
    }

    /// The value of `key`, read in the next batch.
    public func load(_ key: String) async throws -> Value? {
        try await withCheckedThrowingContinuation { continuation in
            let batch: [Waiter]? = state.withLock { state in
                state.pending.append(Waiter(key: key, continuation: continuation))
                guard state.running < maximumBatches else { return nil }
                state.running += 1
                return take(&state)
            }
            if let batch { Task { await run(batch) } }
        }
    }

    private func take(_ state: inout State) -> [Waiter] {
        if state.pending.count <= maximumKeys {
            defer { state.pending = [] }
            return state.pending
        }
        let batch = Array(state.pending.prefix(maximumKeys))
        state.pending.removeFirst(maximumKeys)
        return batch
    }

    /// Runs `batch`, then the keys that gathered meanwhile, until none is left.
    private func run(_ first: [Waiter]) async {
        var batch = first
        while true {
            var keys = batch.map(\.key)
            if keys.count > 1 { keys = Array(Set(keys)) }
            do {
                let values = try await fetch(keys)
                for waiter in batch { waiter.continuation.resume(returning: values[waiter.key]) }
            } catch {
                for waiter in batch { waiter.continuation.resume(throwing: error) }
            }
            let next: [Waiter]? = state.withLock { state in
                guard !state.pending.isEmpty else {
                    state.running -= 1
                    return nil
                }
                return take(&state)
            }
            guard let next else { return }
            batch = next
        }
    }
}
