import EnrichmentCore
import Essentials
import LocationCore
import PostgresNIO

extension PostgresLocationStore {
    /// The devices whose region state logs the region as entered. The state is a JSON document per device: the
    /// rows naming the region are found by its quoted id, then read to be sure.
    public func devicesInside(region storedId: String) async throws -> [String] {
        let needle = String(decoding: JSONValue.string(storedId).encodedData(), as: UTF8.self)
        let rows = try await database.bulkRead(
            "SELECT device_id, body FROM region_state WHERE strpos(body, \(needle)) > 0")
        var inside: [String] = []
        for try await (device, body) in rows.decode((String, String).self) {
            if try LocationCodec.regionState(body).logs[storedId]?.didEnter == true { inside.append(device) }
        }
        return inside
    }
}
