import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// A diagnosis, off unless `ENRICH_SQLITE_STATEMENTS` names a file: every statement SQLite runs in this process
/// (SQLite's own profile: the time from its first step to its end, on the connection that ran it), counted and
/// summed by its SQL text, written to that file every two seconds as a table sorted by total time: what
/// PostgreSQL's `pg_stat_statements` gives `scripts/bench-million.sh` with `PG_STATEMENTS=1`. The SQL text is the
/// statement's, without its arguments: no value a request carried (a token, a key) is written.
///
/// SQLite's trace hook is set directly (`sqlite3_trace_v2`), and a statement is found by the address of its SQL
/// text, compared once more with the text seen first there (the address of a finalized statement's text can be
/// reused by another): GRDB's trace event builds and trims the SQL's `String` for every statement, which cost more
/// than the statements themselves.
final class SQLiteStatementProfile: Sendable {
    struct Entry {
        var sql: [CChar]
        var calls = 0
        var nanoseconds: Int64 = 0
    }

    private struct Entries {
        var byAddress: [UInt: Entry] = [:]
        /// What was counted at an address before another statement's text took it, by SQL text. (GRDB prepares
        /// `BEGIN` and `COMMIT` afresh for each transaction, and SQLite gives their texts the same address turn
        /// about: a list of them would grow by two a transaction.)
        var retired: [[CChar]: (calls: Int, nanoseconds: Int64)] = [:]
    }

    /// The process's profile, or nil when the setting is not set.
    static let shared: SQLiteStatementProfile? = ProcessInfo.processInfo.environment["ENRICH_SQLITE_STATEMENTS"]
        .flatMap { $0.isEmpty ? nil : SQLiteStatementProfile(path: $0) }

    let path: String
    private let entries = Mutex(Entries())

    init(path: String, writeEvery seconds: Double = 2) {
        self.path = path
        let thread = Thread { [weak self] in
            while true {
                Thread.sleep(forTimeInterval: seconds)
                guard let self else { return }
                self.write()
            }
        }
        thread.name = "sqlite-statements"
        thread.start()
    }

    /// Traces `db`'s statements into the profile. The profile must outlive the connection (the service's is
    /// process-wide).
    func install(on db: Database) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_trace_v2(
            db.sqliteConnection, UInt32(SQLITE_TRACE_PROFILE),
            { _, context, statement, duration in
                guard let context, let statement, let duration else { return 0 }
                let profile = Unmanaged<SQLiteStatementProfile>.fromOpaque(context).takeUnretainedValue()
                profile.record(
                    sqlite3_sql(OpaquePointer(statement)),
                    nanoseconds: duration.assumingMemoryBound(to: Int64.self).pointee)
                return 0
            }, context)
    }

    private func record(_ sql: UnsafePointer<CChar>?, nanoseconds: Int64) {
        guard let sql else { return }
        let address = UInt(bitPattern: sql)
        entries.withLock { entries in
            if let seen = entries.byAddress[address]?.sql, strcmp(seen, sql) != 0 {
                let old = entries.byAddress.removeValue(forKey: address)!
                entries.retired[old.sql, default: (0, 0)].calls += old.calls
                entries.retired[old.sql, default: (0, 0)].nanoseconds += old.nanoseconds
            }
            var entry = entries.byAddress.removeValue(forKey: address) ?? Entry(sql: Self.copy(sql))
            entry.calls += 1
            entry.nanoseconds += nanoseconds
            entries.byAddress[address] = entry
        }
    }

    private static func copy(_ sql: UnsafePointer<CChar>) -> [CChar] {
        Array(UnsafeBufferPointer(start: sql, count: strlen(sql) + 1))
    }

    /// The table: total seconds, calls, mean milliseconds and the SQL (on one line), largest total first; the same
    /// SQL prepared on several connections is one row.
    func table() -> String {
        let all = entries.withLock { entries in
            entries.byAddress.values.map { ($0.sql, $0.calls, $0.nanoseconds) }
                + entries.retired.map { ($0.key, $0.value.calls, $0.value.nanoseconds) }
        }
        var bySQL: [String: (calls: Int, nanoseconds: Int64)] = [:]
        for (sql, calls, nanoseconds) in all {
            let text = String(decoding: sql.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                .split(whereSeparator: \.isWhitespace).joined(separator: " ")
            bySQL[text, default: (0, 0)].calls += calls
            bySQL[text, default: (0, 0)].nanoseconds += nanoseconds
        }
        var text = "total_s\tcalls\tmean_ms\tsql\n"
        for (sql, entry) in bySQL.sorted(by: { $0.value.nanoseconds > $1.value.nanoseconds }) {
            let seconds = Double(entry.nanoseconds) / 1e9
            let mean = seconds * 1000 / Double(max(entry.calls, 1))
            text += String(format: "%.3f\t%d\t%.3f\t", seconds, entry.calls, mean) + sql + "\n"
        }
        return text
    }

    private func write() {
        try? table().write(toFile: path, atomically: true, encoding: .utf8)
    }
}
