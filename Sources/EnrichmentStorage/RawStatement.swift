import GRDB
import GRDBSQLite

/// A GRDB statement bound, stepped and read through SQLite's C interface, for the delivery path's per-row
/// statements: GRDB's `StatementArguments` (an array of existentials per row) and its generic `Row` decoding cost
/// more than SQLite's own work there (a push of 1,000 devices inserts 2,000 rows; a batch's answers update 500).
///
/// Use it inside the GRDB access that made the statement (`pool.write` / `pool.read`), and read columns only in
/// `forEachRow`'s body (the column pointers are valid until the next step). It goes around GRDB's statement
/// bookkeeping: no transaction observer hears of these statements (the service registers none), and a failure is
/// thrown as SQLite's `DatabaseError` (which rolls the access's transaction back, as any error).
struct RawStatement {
    /// Kept so that the handle lives as long as this does.
    let statement: Statement
    let handle: SQLiteStatement
    let connection: SQLiteConnection

    init(_ statement: Statement, in db: Database) {
        self.statement = statement
        handle = statement.sqliteStatement
        connection = db.sqliteConnection!
    }

    /// SQLite copies the bytes (`SQLITE_TRANSIENT`).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    // Parameters are numbered from 1, as in SQLite.

    func bind(_ index: Int32, _ value: String?) throws {
        guard var value else { return try check(sqlite3_bind_null(handle, index)) }
        let code = value.withUTF8 { bytes in
            // The length is given (a Swift string's bytes need not end with a NUL); an empty string has no
            // address, and a null pointer would bind NULL rather than ''.
            guard let start = bytes.baseAddress, !bytes.isEmpty else {
                return sqlite3_bind_text(handle, index, "", 0, Self.transient)
            }
            return UnsafeRawPointer(start).withMemoryRebound(to: CChar.self, capacity: bytes.count) { text in
                sqlite3_bind_text(handle, index, text, Int32(bytes.count), Self.transient)
            }
        }
        try check(code)
    }

    func bind(_ index: Int32, _ value: Double?) throws {
        try check(value.map { sqlite3_bind_double(handle, index, $0) } ?? sqlite3_bind_null(handle, index))
    }

    func bind(_ index: Int32, _ value: Int?) throws { try bind(index, value.map(Int64.init)) }

    func bind(_ index: Int32, _ value: Int64?) throws {
        try check(value.map { sqlite3_bind_int64(handle, index, $0) } ?? sqlite3_bind_null(handle, index))
    }

    /// A binding SQLite refused (an index out of range, no memory, a value too big) is an error, not ignored.
    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else { throw error(code) }
    }

    /// Runs a statement that returns no rows; the changed row count (`sqlite3_changes`).
    @discardableResult
    func run() throws -> Int {
        defer { sqlite3_reset(handle) }
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE || code == SQLITE_ROW else { throw error(code) }
        return Int(sqlite3_changes(connection))
    }

    /// Steps through every row, handing each to `body`; resets the statement however it ends.
    func forEachRow(_ body: (Columns) throws -> Void) throws {
        defer { sqlite3_reset(handle) }
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { throw error(code) }
            try body(Columns(handle: handle))
        }
    }

    private func error(_ code: Int32) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)),
            sql: String(cString: sqlite3_sql(handle)))
    }

    /// The current row's columns, numbered from 0.
    struct Columns {
        let handle: SQLiteStatement

        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

        func string(_ column: Int32) -> String? {
            guard !isNull(column), let start = sqlite3_column_text(handle, column) else { return nil }
            return String(
                decoding: UnsafeBufferPointer(start: start, count: Int(sqlite3_column_bytes(handle, column))),
                as: UTF8.self)
        }

        func int(_ column: Int32) -> Int? { isNull(column) ? nil : Int(sqlite3_column_int64(handle, column)) }

        func int64(_ column: Int32) -> Int64? { isNull(column) ? nil : sqlite3_column_int64(handle, column) }

        func double(_ column: Int32) -> Double? { isNull(column) ? nil : sqlite3_column_double(handle, column) }

        func bool(_ column: Int32) -> Bool { sqlite3_column_int64(handle, column) != 0 }
    }
}
