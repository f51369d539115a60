import Foundation
import GRDB
import Testing

@testable import EnrichmentStorage

/// `ENRICH_SQLITE_STATEMENTS`: SQLite's statements counted and timed by their SQL, never their arguments.
@Suite("SQLite: the statement profile (a diagnosis)")
struct SQLiteStatementProfileTests {
    @Test("each statement is counted by its SQL, written to the file, and no argument appears in it")
    func countsBySQL() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("statements-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let profile = SQLiteStatementProfile(path: path, writeEvery: 0.05)
        // Two connections: the same SQL prepared on each is one row of the table.
        for _ in 0..<2 {
            let queue = try DatabaseQueue()
            try queue.inDatabase { db in
                profile.install(on: db)
                try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, token TEXT NOT NULL)")
                for index in 0..<3 {
                    try db.execute(sql: "INSERT INTO t (token) VALUES (?)", arguments: ["secret-token-\(index)"])
                }
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
            }
        }
        let table = profile.table()
        let rows = table.split(separator: "\n").map { $0.split(separator: "\t", maxSplits: 3).map(String.init) }
        #expect(rows.first == ["total_s", "calls", "mean_ms", "sql"])
        let insert = rows.first { $0.last == "INSERT INTO t (token) VALUES (?)" }
        #expect(insert?[1] == "6", "\(table)")
        #expect(rows.contains { $0.last == "SELECT count(*) FROM t" && $0[1] == "2" }, "\(table)")
        #expect(!table.contains("secret-token"))
        // Totals are sorted, largest first.
        let totals = rows.dropFirst().compactMap { Double($0[0]) }
        #expect(totals == totals.sorted(by: >))
        // The file follows within a few of its periods.
        var written = ""
        for _ in 0..<100 where !(written.contains("\t6\t") && written.contains("INSERT INTO t (token) VALUES (?)")) {
            try await Task.sleep(for: .milliseconds(20))
            written = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        }
        #expect(written.contains("\t6\t") && written.contains("INSERT INTO t (token) VALUES (?)"), "\(written)")
        #expect(!written.contains("secret-token"))
    }
}
