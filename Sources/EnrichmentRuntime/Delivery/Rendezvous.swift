import Synchronization

/// Wake-ups by key: a task waits for `notify(key)` (or a timeout) without missing one that came in between.
///
/// A waiter first `watch`es its key (from then on every notify of the key is counted), checks its condition, then
/// waits for a notify counted after that; `unwatch` forgets the key when nobody watches it any more.
final class Rendezvous: Sendable {
    private struct State {
        var nextWaiter = 0
        var watchers: [String: Int] = [:]
        var generations: [String: Int] = [:]
        var waiters: [String: [Int: CheckedContinuation<Void, Never>]] = [:]
    }

    private let state = Mutex(State())

    /// Starts counting notifies of `key`; returns the count to wait past.
    func watch(_ key: String) -> Int {
        state.withLock { state in
            state.watchers[key, default: 0] += 1
            return state.generations[key, default: 0]
        }
    }

    /// How many notifies of a watched `key` were counted so far (wait past this to miss none).
    func generation(_ key: String) -> Int {
        state.withLock { $0.generations[key, default: 0] }
    }

    func unwatch(_ key: String) {
        state.withLock { state in
            let left = state.watchers[key, default: 1] - 1
            if left <= 0 {
                state.watchers[key] = nil
                state.generations[key] = nil
            } else {
                state.watchers[key] = left
            }
        }
    }

    /// Wakes every waiter of `key` (a notify nobody watches is dropped).
    func notify(_ key: String) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.watchers[key] != nil else { return [] }
            state.generations[key, default: 0] += 1
            return state.waiters.removeValue(forKey: key).map { Array($0.values) } ?? []
        }
        for continuation in woken { continuation.resume() }
    }

    /// Waits until `key` was notified after `seen`, or `timeout` passed; returns true when notified.
    func wait(_ key: String, since seen: Int, timeout: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.waitForNotify(key, since: seen)
                return !Task.isCancelled
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    private func waitForNotify(_ key: String, since seen: Int) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.generations[key, default: 0] != seen || Task.isCancelled { return true }
                    state.waiters[key, default: [:]][id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state in
                let removed = state.waiters[key]?.removeValue(forKey: id)
                if state.waiters[key]?.isEmpty == true { state.waiters[key] = nil }
                return removed
            }
            continuation?.resume()
        }
    }
}
