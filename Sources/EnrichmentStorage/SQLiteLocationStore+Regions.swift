import EnrichmentCore
import Essentials
import GRDB
import LocationCore

extension SQLiteLocationStore {
    /// The devices whose region state logs the region as entered. The state is a JSON document per device: the
    /// rows naming the region are found by its quoted id, then read to be sure.
    public func devicesInside(region storedId: String) async throws -> [String] {
        let needle = String(decoding: JSONValue.string(storedId).encodedData(), as: UTF8.self)
        return try await database.pool.read { db in
            var inside: [String] = []
            let rows = try Row.fetchCursor(
                db, sql: "SELECT device_id, body FROM region_state WHERE instr(body, ?) > 0", arguments: [needle])
            while let row = try rows.next() {
                let state = try LocationCodec.regionState(row[1])
                if state.logs[storedId]?.didEnter == true { inside.append(row[0]) }
            }
            return inside
        }
    }
}
