public import EnrichmentPostgres
import Foundation
public import Logging
public import PostgresNIO

/// A fresh PostgreSQL database per test, on the cluster `scripts/with-postgres.sh` starts (the README's test
/// command, `scripts/test.sh`, runs the tests through it and sets ENRICH_TEST_DATABASE_URL).
public enum PostgresTestDatabase {
    struct Unavailable: Error, CustomStringConvertible {
        var description: String {
            "ENRICH_TEST_DATABASE_URL is not set: run the tests with `scripts/test.sh` (the README's test command; "
                + "`scripts/test.sh --filter NAME` for some), which starts a throwaway PostgreSQL cluster"
        }
    }

    public static var logger: Logger {
        var logger = Logger(label: "postgres-test")
        logger.logLevel = .error
        return logger
    }

    /// The settings of a new, empty database named `enrich_test_<random>` (migrated when opened).
    public static func make() async throws -> PostgresSettings {
        guard let url = ProcessInfo.processInfo.environment["ENRICH_TEST_DATABASE_URL"] else { throw Unavailable() }
        var settings = try PostgresSettings(url: url)
        settings.tls = .disable
        let name = "enrich_test_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
        let admin = PostgresClient(configuration: try settings.clientConfiguration(), backgroundLogger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await admin.run() }
            try await admin.query("CREATE DATABASE \(unescaped: name)")
            group.cancelAll()
        }
        settings.database = name
        return settings
    }

    /// The URL of a new, empty database (for a service's ENRICH_DATABASE_URL).
    public static func makeURL() async throws -> String {
        let settings = try await make()
        return "postgres://\(settings.username)@\(settings.host):\(settings.port)/\(settings.database)?sslmode=disable"
    }

    /// Runs `body` with a client of the database at `url` (a test reading what the service wrote).
    public static func withClient<T: Sendable>(
        url: String, _ body: @Sendable (PostgresClient) async throws -> T
    ) async throws -> T {
        var settings = try PostgresSettings(url: url)
        settings.tls = .disable
        let client = PostgresClient(configuration: try settings.clientConfiguration(), backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// A migrated database of its own.
    public static func open() async throws -> PostgresBackend {
        try await PostgresBackend(settings: try await make(), logger: logger)
    }
}
