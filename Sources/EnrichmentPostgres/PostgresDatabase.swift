public import Logging
import NIOSSL
public import PostgresNIO

/// A pool of connections to PostgreSQL that runs for the life of this object, with the schema migrated.
///
/// Migrations are versioned; when several nodes start together, one applies them under an advisory lock and the
/// others wait for it, then find nothing left to do.
public final class PostgresBackend: Sendable {
    public let client: PostgresClient
    public let settings: PostgresSettings
    let logger: Logger
    private let runner: Task<Void, Never>

    /// Connects (lazily, per query) and migrates; `close()` when done.
    public init(settings: PostgresSettings, logger: Logger) async throws {
        self.settings = settings
        self.logger = logger
        // One connection first: a wrong host, password or certificate fails here at once, with its reason (the
        // pool would keep retrying), and the migrations run on it.
        do {
            let probe = try await Self.connectWaiting(settings, logger: logger)
            do {
                try await Self.migrate(probe, logger: logger)
                try? await probe.close()
            } catch {
                try? await probe.close()
                throw error
            }
        } catch {
            throw PostgresSettingsError("cannot use \(settings): \(Self.describe(error))")
        }
        let client = PostgresClient(configuration: try settings.clientConfiguration(), backgroundLogger: logger)
        self.client = client
        runner = Task { await client.run() }
    }

    /// One connection; while the database refuses connections or is starting, tried again (1 s apart, then up to
    /// 5 s) until `settings.startupWait` has passed, with a warning each time. Other failures (a password, a
    /// certificate, a missing database) are final at once: waiting cannot fix them.
    static func connectWaiting(_ settings: PostgresSettings, logger: Logger) async throws -> PostgresConnection {
        let started = ContinuousClock.now
        var pause = Duration.seconds(1)
        var tries = 0
        while true {
            tries += 1
            do {
                return try await PostgresConnection.connect(
                    configuration: try settings.connectionConfiguration(), id: 0, logger: logger)
            } catch {
                let waited = ContinuousClock.now - started
                guard isTransient(error), waited < settings.startupWait else { throw error }
                logger.warning(
                    "PostgreSQL is not reachable yet; trying again",
                    metadata: [
                        "database": "\(settings)", "try": "\(tries)", "reason": "\(describe(error))",
                        "waited": "\(waited.components.seconds) s of \(settings.startupWait.components.seconds) s",
                    ])
                try await Task.sleep(for: min(pause, settings.startupWait - waited))
                pause = min(.seconds(5), pause * 2)
            }
        }
    }

    /// True for a failure that a database starting beside us shows: the connection refused or cut, a timeout,
    /// or the server saying it is starting up (57P03).
    public static func isTransient(_ error: any Error) -> Bool {
        if error is PostgresConnectionLost { return true }
        guard let error = error as? PSQLError else { return false }
        if error.serverInfo?[.sqlState] == "57P03" { return true }
        switch error.code {
        case .connectionError:
            // A TLS failure is a configuration problem, not a database that is starting.
            return !(error.underlying is NIOSSLError || error.underlying is BoringSSLError)
        case .serverClosedConnection, .uncleanShutdown: return true
        default: return false
        }
    }

    /// True when PostgreSQL refused a statement for its data: a data exception (SQLSTATE class 22, e.g. a NUL byte
    /// in text) or an integrity constraint violation (class 23).
    public static func isDataError(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else { return false }
        return state.hasPrefix("22") || state.hasPrefix("23")
    }

    /// Nil when PostgreSQL answers and takes writes; else what is wrong (reason `database_unavailable`), for
    /// readiness.
    public func storageProblem() async -> (problem: String, reason: String)? {
        do {
            let rows = try await query("SELECT pg_is_in_recovery()")
            for try await inRecovery in rows.decode(Bool.self) where inRecovery {
                return ("PostgreSQL is a standby (in recovery): it cannot take writes", "database_unavailable")
            }
            return nil
        } catch {
            return ("PostgreSQL cannot be reached: \(Self.describe(error))", "database_unavailable")
        }
    }

    /// Stops the pool.
    public func close() {
        runner.cancel()
    }

    deinit { runner.cancel() }

    /// The server's message for a failed query or connection, without the query's bound values.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            return "\(error.code)" + (error.underlying.map { ": \($0)" } ?? "")
        }
        return "\(error)"
    }

    /// The lock every migrating node takes (an arbitrary constant: "enrich" in ASCII).
    static let migrationLock: Int64 = 0x656e_7269_6368

    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        do {
            try await connection.query("SELECT pg_advisory_lock(\(migrationLock))", logger: logger)
            do {
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())
                    """, logger: logger)
                var applied = Set<String>()
                for try await version in try await connection.query(
                    "SELECT version FROM schema_migrations", logger: logger
                ).decode(String.self) {
                    applied.insert(version)
                }
                for (version, statements) in PostgresSchema.migrations where !applied.contains(version) {
                    try await connection.withTransaction(logger: logger) { connection in
                        for statement in statements {
                            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        try await connection.query(
                            "INSERT INTO schema_migrations (version) VALUES (\(version))", logger: logger)
                    }
                    logger.notice("database migrated", metadata: ["version": "\(version)"])
                }
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(migrationLock))", logger: logger)
                throw error
            }
            try await connection.query("SELECT pg_advisory_unlock(\(migrationLock))", logger: logger)
        }
    }
}
