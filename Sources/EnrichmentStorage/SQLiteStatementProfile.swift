import Foundation
import GRDB
import Synchronization

/// A diagnosis, off unless `ENRICH_SQLITE_STATEMENTS` names a file: every statement SQLite runs in this process
/// (SQLite's own profile: the time from its first step to its end, on the connection that ran it), counted and
/// summed by its SQL text, written to that file every two seconds as a table sorted by total time: what
/// PostgreSQL's `pg_stat_statements` gives `scripts/bench-million.sh` with `PG_STATEMENTS=1`. The SQL text is the
/// statement's, without its arguments: no value a request carried (a token, a key) is written.
final class SQLiteStatementProfile: Sendable {
    struct Entry {
        var calls = 0
        var seconds = 0.0
    }

    /// The process's profile, or nil when the setting is not set.
    static let shared: SQLiteStatementProfile? = ProcessInfo.processInfo.environment["ENRICH_SQLITE_STATEMENTS"]
        .flatMap { $0.isEmpty ? nil : SQLiteStatementProfile(path: $0) }

    let path: String
    private let entries = Mutex<[String: Entry]>([:])

    init(path: String, writeEvery seconds: Double = 2) {
        self.path = path
        let thread = Thread { [weak self] in
            while let self {
                Thread.sleep(forTimeInterval: seconds)
                self.write()
            }
        }
        thread.name = "sqlite-statements"
        thread.start()
    }

    /// Traces `db`'s statements into the profile.
    func install(on db: Database) {
        db.trace(options: .profile) { [self] event in
            guard case .profile(let statement, let duration) = event else { return }
            let sql = statement.sql
            entries.withLock { entries in
                entries[sql, default: Entry()].calls += 1
                entries[sql, default: Entry()].seconds += duration
            }
        }
    }

    /// The table: total seconds, calls, mean milliseconds and the SQL (on one line), largest total first.
    func table() -> String {
        let rows = entries.withLock { $0 }.sorted { $0.value.seconds > $1.value.seconds }
        var text = "total_s\tcalls\tmean_ms\tsql\n"
        for (sql, entry) in rows {
            let flat = sql.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            let mean = entry.seconds * 1000 / Double(max(entry.calls, 1))
            text += String(format: "%.3f\t%d\t%.3f\t", entry.seconds, entry.calls, mean) + flat + "\n"
        }
        return text
    }

    private func write() {
        try? table().write(toFile: path, atomically: true, encoding: .utf8)
    }
}
