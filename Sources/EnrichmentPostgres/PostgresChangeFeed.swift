public import Logging
public import PostgresNIO

/// What a node keeps in memory or waits for that other nodes change: pushed by the database with LISTEN/NOTIFY.
///
/// Writers `notify` in the transaction that makes the change (PostgreSQL delivers it at commit, to every
/// listening node). `run` holds one connection of the pool listening on `enrich_changes` and calls `onChange` with
/// each kind notified; when it (re)connects it calls `onChange` for every kind, so a consumer catches up on what
/// it may have missed while it was not listening. Consumers read the changes themselves (a notification carries no
/// data) and keep a slow safety poll.
public final class PostgresChangeFeed: Sendable {
    public static let channel = "enrich_changes"

    /// The kinds of change a node follows.
    public enum Kind: String, Sendable, CaseIterable {
        /// POIs upserted or deleted (the in-memory places index).
        case pois
        /// Deliveries committed (idle delivery lanes claim them at once).
        case deliveries
        /// Custom regions put or deleted.
        case regions
    }

    let database: PostgresBackend
    let onChange: @Sendable (Kind) -> Void
    let logger: Logger

    public init(database: PostgresBackend, logger: Logger, onChange: @escaping @Sendable (Kind) -> Void) {
        self.database = database
        self.logger = logger
        self.onChange = onChange
    }

    /// Tells every listening node (this one too) at commit that `kind` changed.
    public static func notify(_ kind: Kind, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.run("SELECT pg_notify(\(channel), \(kind.rawValue))", logger: logger)
    }

    /// `notify` outside a transaction.
    public static func notify(_ kind: Kind, database: PostgresBackend) async throws {
        try await database.query("SELECT pg_notify(\(channel), \(kind.rawValue))", logger: database.logger)
    }

    /// Listens until cancelled, reconnecting after a second when the connection is lost.
    public func run() async {
        while !Task.isCancelled {
            do {
                try await database.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        logger.debug("listening for changes", metadata: ["channel": "\(Self.channel)"])
                        // Anything may have changed while nobody listened: every consumer reads again.
                        for kind in Kind.allCases { onChange(kind) }
                        for try await notification in notifications {
                            if let kind = Kind(rawValue: notification.payload) { onChange(kind) }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning(
                    "lost the change feed; consumers poll until it is back",
                    metadata: ["error": "\(PostgresBackend.describe(error))"])
            }
            for kind in Kind.allCases { onChange(kind) }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
