import EnrichmentPostgres
import EnrichmentStorage

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
        let run = self.run
        // The check itself never throws; a cancelled one counts as not answering.
        let answered = try? await withTimeout(timeout) { await run() }
        return answered
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

/// `body`'s value, or nil when it has not finished within `timeout`: it is then cancelled, and this returns once it
/// has ended (PostgresNIO gives up a wait for a connection when cancelled). One mechanism for every bound on the
/// database: readiness and the request deadline.
public func withTimeout<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T)
    async throws -> T?
{
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}
