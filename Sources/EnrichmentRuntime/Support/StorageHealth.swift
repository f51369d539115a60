import EnrichmentPostgres
import EnrichmentStorage
import Synchronization

/// Whether the database can be used now, for readiness: reachable and writable, and (SQLite) its disk not full.
public struct StorageHealth: Sendable, Equatable {
    /// Nil when usable; else what is wrong, in a sentence.
    public var problem: String?
    /// `database_unavailable` or `storage_full` when there is a problem.
    public var reason: String?

    public static let ok = StorageHealth(problem: nil, reason: nil)
}

/// Checks the database a runtime uses, within a bound.
///
/// At most one check runs against the database at a time: a probe that comes while one is running waits for that
/// one (within its own bound) instead of starting another. So during an outage, when each check waits on a pool
/// that cannot connect, probes every second never pile up queries; each is answered at its bound, and the first
/// check after the database's return answers for all of them.
public struct StorageHealthCheck: Sendable {
    let running: InFlight

    init(run: @escaping @Sendable () async -> StorageHealth) { running = InFlight(run: run) }

    public func check(within timeout: Duration) async -> StorageHealth {
        let task = running.task()
        // The check itself never throws; a cancelled one counts as not answering.
        let answered = try? await withAbandoningTimeout(timeout) { await task.value }
        return answered
            ?? StorageHealth(
                problem: "the database did not answer within \(Self.shown(timeout)) (ENRICH_READY_TIMEOUT)",
                reason: "database_unavailable")
    }

    /// `0.8 s`, `2 s`.
    static func shown(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    /// The one check in flight, shared by the probes that come while it runs.
    final class InFlight: Sendable {
        let run: @Sendable () async -> StorageHealth
        private let current = Mutex<Task<StorageHealth, Never>?>(nil)

        init(run: @escaping @Sendable () async -> StorageHealth) { self.run = run }

        func task() -> Task<StorageHealth, Never> {
            current.withLock { current in
                if let running = current { return running }
                let run = self.run
                let task = Task { [weak self] in
                    let health = await run()
                    self?.current.withLock { $0 = nil }
                    return health
                }
                current = task
                return task
            }
        }
    }

    static func postgres(_ backend: PostgresBackend) -> StorageHealthCheck {
        StorageHealthCheck { StorageHealth(await backend.storageProblem()) }
    }

    static func sqlite(_ database: SQLiteDatabase) -> StorageHealthCheck {
        StorageHealthCheck { StorageHealth(await database.storageProblem()) }
    }
}

extension StorageHealth {
    init(_ problem: (problem: String, reason: String)?) {
        self.init(problem: problem?.problem, reason: problem?.reason)
    }

    /// What a storage error thrown by a request means for the client, when it is an outage rather than a bug:
    /// the disk full (SQLite), or PostgreSQL unreachable. Nil for any other error.
    public static func outage(in error: any Error) -> StorageHealth? {
        if SQLiteDatabase.isDiskFull(error) {
            return StorageHealth(
                problem:
                    "the database's disk is full: nothing was written; free space and the service resumes by itself",
                reason: "storage_full")
        }
        if PostgresBackend.isTransient(error) {
            return StorageHealth(
                problem: "PostgreSQL cannot be reached: nothing was acknowledged; try again shortly",
                reason: "database_unavailable")
        }
        return nil
    }
}

/// An error a store throws when the database refused a write for what it holds (a value out of range, a
/// constraint), not because the database is unavailable: the same write minus the row at fault would go through.
public protocol DataRefusal: Error {}

extension StorageHealth {
    /// True when `error` says the database refused the data itself: PostgreSQL's data exceptions and integrity
    /// constraint violations (SQLSTATE classes 22 and 23), SQLite's constraint, type and size errors, or a
    /// `DataRefusal`. Anything else (an outage, a timeout, a standby, too many connections) is not.
    public static func refusesData(_ error: any Error) -> Bool {
        if error is any DataRefusal { return true }
        return PostgresBackend.isDataError(error) || SQLiteDatabase.isDataError(error)
    }
}

/// A request that waited for the database longer than `ENRICH_DATABASE_TIMEOUT`.
public struct DatabaseTimeout: Error, CustomStringConvertible {
    public var timeout: Duration
    public init(timeout: Duration) { self.timeout = timeout }
    public var description: String {
        "the database did not answer within \(timeout.components.seconds) s (ENRICH_DATABASE_TIMEOUT): nothing was "
            + "acknowledged; try again shortly"
    }
}

/// `body`'s value, or nil when it has not finished within `timeout`. The bound on the database for readiness and
/// the delivery lanes' calls.
///
/// At the bound `body` is cancelled and this returns at once, without waiting for it to end: a call that ignores
/// cancellation (a query that will never be answered) is left behind rather than holding its caller past the
/// bound. Task-local values (the app, the trace) carry into `body`.
public func withAbandoningTimeout<T: Sendable>(
    _ timeout: Duration, _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    let race = TimeoutRace<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.begin(continuation)
            let work = Task {
                do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
            }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                if race.finish(.success(nil)) { work.cancel() }
            }
            race.onEnd { timer.cancel() }
            race.onCancel { work.cancel() }
        }
    } onCancel: {
        race.cancel()
    }
}

/// Whichever ends first of `withAbandoningTimeout`'s body and its timer resumes the caller, once.
private final class TimeoutRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T?, any Error>?
        var ended = false
        var cancelled = false
        var endActions: [@Sendable () -> Void] = []
        var cancelActions: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())

    func begin(_ continuation: CheckedContinuation<T?, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    /// Resumes the caller unless it has been already; true when this call did.
    @discardableResult
    func finish(_ result: Result<T?, any Error>) -> Bool {
        let taken = state.withLock { state -> (CheckedContinuation<T?, any Error>, [@Sendable () -> Void])? in
            guard !state.ended, let continuation = state.continuation else { return nil }
            state.ended = true
            state.continuation = nil
            defer { state.endActions = [] }
            return (continuation, state.endActions)
        }
        guard let (continuation, actions) = taken else { return false }
        for action in actions { action() }
        continuation.resume(with: result)
        return true
    }

    func onEnd(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.ended { return true }
            state.endActions.append(action)
            return false
        }
        if now { action() }
    }

    func onCancel(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.cancelled { return true }
            state.cancelActions.append(action)
            return false
        }
        if now { action() }
    }

    /// The caller was cancelled: so is the body (the timer still bounds the wait).
    func cancel() {
        let actions = state.withLock { state -> [@Sendable () -> Void] in
            state.cancelled = true
            defer { state.cancelActions = [] }
            return state.cancelActions
        }
        for action in actions { action() }
    }
}
