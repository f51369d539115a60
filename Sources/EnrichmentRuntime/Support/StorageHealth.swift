import EnrichmentPostgres
import EnrichmentStorage
import Foundation

/// Whether the database can be used now, for readiness: reachable and writable, and (SQLite) its disk not full.
public struct StorageHealth: Sendable, Equatable {
    /// Nil when usable; else what is wrong, in a sentence.
    public var problem: String?
    /// `database_unavailable` or `storage_full` when there is a problem.
    public var reason: String?

    public static let ok = StorageHealth(problem: nil, reason: nil)
}

/// Checks the database a runtime uses, within a bound.
public struct StorageHealthCheck: Sendable {
    let run: @Sendable () async -> StorageHealth

    public func check(within timeout: Duration) async -> StorageHealth {
        await withDeadline(timeout) { await run() }
            ?? StorageHealth(
                problem: "the database did not answer within \(timeout.components.seconds) s",
                reason: "database_unavailable")
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

/// A request that waited for the database longer than `ENRICH_DATABASE_TIMEOUT`.
public struct DatabaseTimeout: Error, CustomStringConvertible {
    public var timeout: Duration
    public init(timeout: Duration) { self.timeout = timeout }
    public var description: String {
        "the database did not answer within \(timeout.components.seconds) s (ENRICH_DATABASE_TIMEOUT): nothing was "
            + "acknowledged; try again shortly"
    }
}

/// `body`'s value, or nil when it has not finished within `timeout` (it is then cancelled and left to end by
/// itself: the caller does not wait for it).
public func withDeadline<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    let race = DeadlineRace<T>()
    return await withCheckedContinuation { continuation in
        race.start(continuation)
        let work = Task {
            let value = await body()
            race.finish(value)
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if race.finish(nil) { work.cancel() }
        }
        race.onFinish { timer.cancel() }
    }
}

/// The first of a body and its timer resumes the continuation.
private final class DeadlineRace<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T?, Never>?
    private var cleanup: (@Sendable () -> Void)?
    private var done = false

    func start(_ continuation: CheckedContinuation<T?, Never>) {
        lock.withLock { self.continuation = continuation }
    }

    /// Resumes with `value` if nothing did before; returns whether this call did.
    @discardableResult
    func finish(_ value: T?) -> Bool {
        let (continuation, cleanup): (CheckedContinuation<T?, Never>?, (@Sendable () -> Void)?) = lock.withLock {
            guard !done else { return (nil, nil) }
            done = true
            defer {
                self.continuation = nil
                self.cleanup = nil
            }
            return (self.continuation, self.cleanup)
        }
        guard let continuation else { return false }
        cleanup?()
        continuation.resume(returning: value)
        return true
    }

    func onFinish(_ cleanup: @escaping @Sendable () -> Void) {
        let run = lock.withLock {
            if done { return true }
            self.cleanup = cleanup
            return false
        }
        if run { cleanup() }
    }
}
