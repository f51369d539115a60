import EnrichmentPostgres
import EnrichmentRuntime
import Foundation
import PostgresNIO
import TestSupport
import Testing

/// A connection that closes under a query or a transaction: the caller gets a transient error at once, never a
/// wait without end (postgres-nio 1.33 never answers a query written to a connection that has already closed).
@Suite("PostgreSQL connection loss")
struct PostgresConnectionLossTests {
    struct BodyFailed: Error {}

    /// The body's value, or a recorded issue when it has not returned within 10 s.
    func within10s<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T? {
        let value = try await withAbandoningTimeout(.seconds(10), body)
        if value == nil { Issue.record("no answer within 10 s: the call waits without end") }
        return value
    }

    @Test("a transaction whose connection closed under it ends at once with its own error (no ROLLBACK waited for)")
    func transactionOnClosedConnection() async throws {
        let backend = try await PostgresTestDatabase.open()
        defer { backend.close() }
        let outcome = try await within10s {
            do {
                try await backend.withTransaction { connection in
                    try await connection.close()
                    throw BodyFailed()
                }
                return "returned"
            } catch is BodyFailed {
                return "its own error"
            } catch {
                return "\(error)"
            }
        }
        #expect(outcome == "its own error")
        // The pool goes on with a new connection.
        let one = try await backend.query("SELECT 1::int8").decode(Int64.self).first { _ in true }
        #expect(one == 1)
    }

    @Test("a connection closed just before it goes back to the pool is not handed out to the next query's failure")
    func closedConnectionBackInPool() async throws {
        let backend = try await PostgresTestDatabase.open()
        defer { backend.close() }
        // The pool learns of the close a moment later; the next query, asked for at once, may be handed the closed
        // connection. Nothing has been sent on it, so it asks again rather than failing.
        for round in 1...10 {
            try await backend.withConnection { connection in try await connection.close() }
            let one = try await backend.query("SELECT \(round)::int8").decode(Int64.self).first { _ in true }
            #expect(one == Int64(round))
        }
    }

    @Test("a query on a connection that has closed fails at once, as a transient outage")
    func queryOnClosedConnection() async throws {
        let backend = try await PostgresTestDatabase.open()
        defer { backend.close() }
        let outcome = try await within10s {
            do {
                try await backend.withTransaction { connection in
                    try await connection.query("SELECT 1", logger: PostgresTestDatabase.logger)
                    try await connection.close()
                    // The next statement of the transaction: the COMMIT.
                }
                return "committed"
            } catch {
                return PostgresBackend.isTransient(error) ? "transient" : "\(error)"
            }
        }
        #expect(outcome == "transient")
    }
}
