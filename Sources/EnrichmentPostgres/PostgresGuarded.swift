public import Logging
public import PostgresNIO

/// The connection a query was meant for has closed: nothing was sent. Transient, like the database going away.
///
/// postgres-nio 1.33 writes a query to its connection without a promise for the write: on a connection that has
/// already closed, the write fails unseen and the query is never answered, so its caller would wait forever (a
/// `ROLLBACK` after the connection broke mid-transaction, or a pooled connection handed out just as it closed).
/// Every query here looks first and fails at once instead.
public struct PostgresConnectionLost: Error, Sendable, CustomStringConvertible {
    public var description: String { "the connection to PostgreSQL was closed; nothing was sent on it" }
}

/// The pool handed out a connection that had closed, before anything was sent on it: safe to ask again.
struct HandedOutClosed: Error {}

extension PostgresConnection {
    /// `query`, failing with `PostgresConnectionLost` when the connection has closed.
    @discardableResult
    func run(
        _ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line
    ) async throws -> PostgresRowSequence {
        guard !isClosed else { throw PostgresConnectionLost() }
        return try await self.query(query, logger: logger, file: file, line: line)
    }
}

/// The rows of one query, read in full before its connection goes back to the pool.
public struct PostgresRows: AsyncSequence, Sendable {
    public typealias Element = PostgresRow
    public typealias Failure = any Error
    let rows: [PostgresRow]

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: IndexingIterator<[PostgresRow]>
        public mutating func next() async throws -> PostgresRow? { base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: rows.makeIterator()) }
}

extension PostgresBackend {
    /// One query on a pooled connection, its rows read in full. Fails at once (transient) when the connection
    /// handed out has closed.
    @discardableResult
    public func query(
        _ query: PostgresQuery, logger: Logger? = nil, file: String = #fileID, line: Int = #line
    ) async throws -> PostgresRows {
        let logger = logger ?? self.logger
        return try await withConnection { connection in
            PostgresRows(rows: try await connection.run(query, logger: logger, file: file, line: line).collect())
        }
    }

    /// A pooled connection for `body`. The pool learns of a closed connection a moment after it closed, and may
    /// hand it out in between: nothing has been sent on it then, so another one is asked for (up to three times,
    /// 10 ms apart) before the call fails (transient) with `PostgresConnectionLost`.
    public func withConnection<T>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> sending T
    ) async throws -> sending T {
        var attempt = 1
        while true {
            do {
                return try await client.withConnection(isolation: isolation) { connection in
                    guard !connection.isClosed else { throw HandedOutClosed() }
                    return try await body(connection)
                }
            } catch is HandedOutClosed {
                guard attempt < 3 else { throw PostgresConnectionLost() }
                attempt += 1
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// One large read (an audience's cells, a common tag's devices) on a pooled connection, its rows read in full,
    /// with PostgreSQL's JIT compilation off for it (`SET LOCAL jit = off` in a transaction of its own). The
    /// planner estimates a join over thousands of cell ranges at millions of rows, far over `jit_above_cost`, and
    /// compiling the plan then took 150 ms of a 330 ms query that returns 36,000 rows (BENCHMARKS.md); the
    /// setting ends with the transaction, so the pooled connection keeps the server's own setting.
    public func bulkRead(
        _ query: PostgresQuery, logger: Logger? = nil, file: String = #fileID, line: Int = #line
    ) async throws -> PostgresRows {
        let logger = logger ?? self.logger
        return try await withTransaction { connection in
            try await connection.run("SET LOCAL jit = off", logger: logger)
            return PostgresRows(rows: try await connection.run(query, logger: logger, file: file, line: line).collect())
        }
    }

    /// `body` in a transaction: committed when it returns, rolled back when it throws, and its own error comes out
    /// as thrown. On a connection that broke, nothing more is sent (the server has rolled back already).
    public func withTransaction<T>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> sending T
    ) async throws -> sending T {
        let logger = self.logger
        return try await withConnection(isolation: isolation) { connection in
            try await connection.run("BEGIN", logger: logger)
            let value: T
            do {
                value = try await body(connection)
            } catch {
                if !connection.isClosed { _ = try? await connection.run("ROLLBACK", logger: logger) }
                throw error
            }
            try await connection.run("COMMIT", logger: logger)
            return value
        }
    }
}

extension PostgresConnection {
    /// Plans the rest of the transaction for reads through an index in its order: no sequential or bitmap scan, no
    /// sort, no parallel workers. `deliveries` changes faster than its statistics (a push makes a million rows in
    /// a minute): with statistics from before the push, the claim read and sorted every pending delivery to take
    /// 500 (100 ms against 1 ms), and the record joined a batch's answers to every leased row (540 ms against 3 ms
    /// for 150). A page of the app's devices at a million registrations was read by two parallel workers, whose
    /// start took 12 ms of a 0.5 ms read (BENCHMARKS.md).
    func planThroughKeys(logger: Logger) async throws {
        try await run(
            """
            SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
                set_config('enable_sort', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)
            """, logger: logger)
    }
}
