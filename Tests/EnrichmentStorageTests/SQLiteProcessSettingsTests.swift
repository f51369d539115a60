import Foundation
import GRDB
import GRDBSQLite
import Testing

@testable import EnrichmentStorage

/// SQLite's process-wide settings (`SQLiteDatabase.processSettings`): its memory statistics are off, so that its
/// allocations take no process-wide mutex.
@Suite("SQLite: process-wide settings")
struct SQLiteProcessSettingsTests {
    @Test("memory statistics are off once a database opened, unless SQLite ran before in the process and said so")
    func memoryStatistics() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("settings-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try SQLiteDatabase(path: directory.appendingPathComponent("db.sqlite").path)
        // Allocations: a table with some rows, written and read back.
        try await database.pool.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
            for index in 0..<1_000 {
                try db.execute(sql: "INSERT INTO t (text) VALUES (?)", arguments: ["row \(index)"])
            }
        }
        let count = try await database.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
        #expect(count == 1_000)
        switch SQLiteDatabase.processSettings {
        case SQLITE_OK:
            // Nothing counted: SQLite did not track the bytes it holds for the open connections.
            #expect(sqlite3_memory_used() == 0)
        case SQLITE_MISUSE:
            // Another test opened SQLite first: the statistics stayed on, and they count.
            #expect(sqlite3_memory_used() > 0)
        default:
            Issue.record("sqlite3_config answered \(SQLiteDatabase.processSettings)")
        }
    }
}
