import Synchronization

/// Mutual exclusion per key for async code: `withLocks(keys)` runs its body while no other holder has any of
/// those keys. Keys are taken in sorted order, so two holders of overlapping sets cannot deadlock.
final class KeyedAsyncLock: Sendable {
    private struct State {
        var held: Set<String> = []
        var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    }
    private let state = Mutex(State())

    private func lock(_ key: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = state.withLock { state -> Bool in
                if state.held.insert(key).inserted { return true }
                state.waiters[key, default: []].append(continuation)
                return false
            }
            if acquired { continuation.resume() }
        }
    }

    private func unlock(_ key: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if var queue = state.waiters[key], !queue.isEmpty {
                // Hand the key straight to the next waiter: it stays held.
                let first = queue.removeFirst()
                state.waiters[key] = queue.isEmpty ? nil : queue
                return first
            }
            state.held.remove(key)
            return nil
        }
        next?.resume()
    }

    func withLocks<T>(_ keys: [String], _ body: () async throws -> T) async throws -> T {
        let ordered = Array(Set(keys)).sorted()
        for key in ordered { await lock(key) }
        defer { for key in ordered.reversed() { unlock(key) } }
        return try await body()
    }
}
