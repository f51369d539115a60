import PostgresNIO

/// Large reads (audiences: 100,000 rows and more) answered as one row of two values, so that the client decodes
/// two values instead of a row, or an array element, per device:
///
///     SELECT string_agg(<text>, E'\n'), string_agg(float8send(<a>) || float8send(<b>) ..., ''::bytea) FROM ...
///
/// The text of each row is one line (it must hold no line break: device ids cannot, `DeviceID`), and its doubles
/// follow each other as big-endian IEEE values in the same order (the aggregates of one query see the rows in one
/// order). Decoded as rows, the 128,000 devices of a 10 km audience cost the client several times the query.
enum PackedRows {
    /// Calls `body` with each line and its `doubles` values, in order; throws when lines and values do not pair.
    static func forEach(
        _ rows: PostgresRows, doubles count: Int, _ body: (Substring, UnsafeBufferPointer<Double>) throws -> Void
    ) async throws {
        var values = [Double](repeating: 0, count: count)
        for try await (text, packed) in rows.decode((String?, ByteBuffer?).self) {
            guard let text, var packed else { continue }
            for bytes in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
                let line = Substring(bytes)
                for index in 0..<count {
                    guard let bits = packed.readInteger(as: UInt64.self) else { throw PackedRowsMismatch() }
                    values[index] = Double(bitPattern: bits)
                }
                try values.withUnsafeBufferPointer { try body(line, $0) }
            }
            guard packed.readableBytes == 0 else { throw PackedRowsMismatch() }
        }
    }

    /// The lines of a one-row `string_agg(<text>, E'\n')` answer (none for NULL: no row matched).
    static func lines(_ rows: PostgresRows) async throws -> [String] {
        var found: [String] = []
        for try await text in rows.decode(String?.self) {
            guard let text else { continue }
            found += text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
                String(Substring($0))
            }
        }
        return found
    }
}

/// The lines and the values of a packed answer did not pair up (a text with a line break in it).
struct PackedRowsMismatch: Error, CustomStringConvertible {
    var description: String { "a packed answer does not pair each line with its values" }
}
