import EnrichmentRuntime
import Synchronization

/// Deadlines of the requests in flight, enforced by one sweep every `resolution` instead of a timer per request.
///
/// `run` executes its body in a child task that registers itself here; a sweep finds the children past their
/// deadline and cancels them. (A sleeping child per request, racing the handler, cost a second child task, a
/// dispatch timer and a wake-up of the dispatch manager thread each: about 6-8% of a PostgreSQL node's CPU during
/// enrichment, BENCHMARKS.md.) The sweeping task runs only while some request is registered.
final class RequestDeadlines: Sendable {
    static let shared = RequestDeadlines(resolution: .milliseconds(50))

    /// A registered child task. Its `UnsafeCurrentTask` is used only under the lock and only while registered: the
    /// child unregisters (under the lock) before it ends, so the task is alive whenever it is cancelled here.
    private struct Entry: @unchecked Sendable {
        var deadline: ContinuousClock.Instant
        var task: UnsafeCurrentTask
    }

    private struct State: ~Copyable {
        var next: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
        /// Entries cancelled by a sweep (their requests answer that the bound was reached).
        var fired: Set<UInt64> = []
        var sweeping = false
    }

    private let state = Mutex(State())
    let resolution: Duration

    init(resolution: Duration) { self.resolution = resolution }

    /// `body`'s value, or nil when it failed after being cancelled at `timeout` (what it awaits is cancelled;
    /// a body that finishes anyway gives its value). The caller's task itself is never cancelled. A body that
    /// ignores cancellation holds its caller: the database calls under it do not.
    func run<T: Sendable>(within timeout: Duration, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T?
    {
        let deadline = ContinuousClock.now + timeout
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                let id = withUnsafeCurrentTask { task in task.map { self.register($0, deadline: deadline) } }
                do {
                    let value = try await body()
                    // Finished, even if just past the bound: its answer is the truth, and is given.
                    if let id { _ = self.unregister(id) }
                    return value
                } catch {
                    if let id, self.unregister(id) { return nil }
                    throw error
                }
            }
            return try await group.next() ?? nil
        }
    }

    /// `run`, throwing `DatabaseTimeout` when the bound was reached: the database bound of a request (with
    /// PostgreSQL) and of a batch of fix reports.
    func bounded<T: Sendable>(within timeout: Duration, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        guard let value = try await run(within: timeout, body) else { throw DatabaseTimeout(timeout: timeout) }
        return value
    }

    /// Registers a task; starts the sweep if none runs.
    private func register(_ task: UnsafeCurrentTask, deadline: ContinuousClock.Instant) -> UInt64 {
        let (id, startSweep) = state.withLock { state in
            let id = state.next
            state.next &+= 1
            state.entries[id] = Entry(deadline: deadline, task: task)
            defer { state.sweeping = true }
            return (id, !state.sweeping)
        }
        if startSweep { Task.detached { await self.sweep() } }
        return id
    }

    /// Removes a task; true when a sweep had cancelled it for its deadline.
    private func unregister(_ id: UInt64) -> Bool {
        state.withLock { state in
            state.entries.removeValue(forKey: id)
            return state.fired.remove(id) != nil
        }
    }

    /// Cancels what is past its deadline, every `resolution`, until nothing is registered.
    private func sweep() async {
        while true {
            try? await Task.sleep(for: resolution)
            let now = ContinuousClock.now
            let done = state.withLock { state in
                for (id, entry) in state.entries where entry.deadline <= now && !state.fired.contains(id) {
                    state.fired.insert(id)
                    entry.task.cancel()
                }
                if state.entries.isEmpty {
                    state.sweeping = false
                    return true
                }
                return false
            }
            if done { return }
        }
    }
}
