import EnrichmentCore
import Foundation
public import GRDB
import GRDBSQLite
import LocationCore
import SQLiteTuning

/// The embedded SQLite database (WAL mode, migrations) that holds fixes, POIs, device tokens and the outbox.
public final class SQLiteDatabase: Sendable {
    /// How hard commits are pushed to disk.
    public enum Durability: String, Sendable, CaseIterable {
        /// `synchronous=NORMAL`: a committed write survives a process crash or kill -9 (WAL is in the OS cache);
        /// the last commits may be lost on power failure.
        case normal
        /// `synchronous=FULL`: every commit is fsynced; survives power failure, slower ingest.
        case full
    }

    public let pool: DatabasePool
    public let path: String

    /// SQLite's process-wide settings, made once before the process's first connection opens: its memory
    /// statistics off (`SQLITE_CONFIG_MEMSTATUS`), so that each of SQLite's allocations no longer takes a
    /// process-wide mutex (4% of the service's CPU when delivering: BENCHMARKS.md, "Item 4, sixth session"). Nothing
    /// here reads them (`sqlite3_memory_used` reads 0). SQLite's result: `SQLITE_OK`, or `SQLITE_MISUSE` when SQLite
    /// already ran in this process (a test that opened it another way first): then the statistics stay on, and
    /// nothing else changes.
    static let processSettings: Int32 = enrichment_sqlite_disable_memory_statistics()

    /// True when SQLite's memory statistics are off for the process (`processSettings` applied); the service logs a
    /// warning otherwise.
    public static var memoryStatisticsOff: Bool { processSettings == SQLITE_OK }

    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    public init(path: String, durability: Durability = .normal) throws {
        _ = Self.processSettings
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.maximumReaderCount = 8
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(durability == .full ? "FULL" : "NORMAL")")
            SQLiteStatementProfile.shared?.install(on: db)
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        self.path = path
        try Self.migrator.migrate(pool)
    }

    /// True when `error` is SQLite saying the disk (or the database's size limit) is full.
    public static func isDiskFull(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return error.resultCode == .SQLITE_FULL
    }

    /// True when SQLite refused a write for its data (a constraint, a type, a value too big), not for its state.
    public static func isDataError(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return [.SQLITE_CONSTRAINT, .SQLITE_MISMATCH, .SQLITE_TOOBIG].contains(error.resultCode)
    }

    /// Free space below which the disk counts as full (a write may not fit).
    public static let minimumFreeBytes: UInt64 = 16 << 20

    /// Nil when the database can be used; else what is wrong and its reason (`storage_full`,
    /// `database_unavailable`), for readiness.
    public func storageProblem() async -> (problem: String, reason: String)? {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var stats = statvfs()
        if statvfs(directory, &stats) == 0 {
            let free = UInt64(stats.f_bavail) * UInt64(stats.f_frsize)
            let total = UInt64(stats.f_blocks) * UInt64(stats.f_frsize)
            // 16 MiB, or 5% of a small filesystem.
            if free < min(Self.minimumFreeBytes, total / 20) {
                return (
                    "the disk holding \(path) is full (\(free >> 20) MiB free): free space; the service resumes by itself",
                    "storage_full"
                )
            }
        }
        do {
            _ = try await pool.read { try Int.fetchOne($0, sql: "SELECT 1") }
            return nil
        } catch {
            return ("the SQLite database cannot be read: \(error)", "database_unavailable")
        }
    }

    /// The journal mode in force (`wal` for a file database).
    public func journalMode() throws -> String {
        try pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
    }
}
