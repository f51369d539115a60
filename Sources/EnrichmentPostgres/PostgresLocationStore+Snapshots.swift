public import EnrichmentCore
public import LocationCore
import PostgresNIO

/// What one enrichment reads of its devices in one statement: the last fix, the region state and the home/work
/// zones, through a statement prepared once per connection.
extension PostgresLocationStore {
    /// The last fix, the region state and the home/work zones of each device, in one statement (what one
    /// enrichment reads: one trip to the database instead of two). No transaction and no lock: a read only.
    public func readSnapshots(deviceIds: [String]) async throws -> (
        fixes: [String: LocationFix], states: [String: DeviceRegionState], zones: [String: [ZoneOfInterest]]
    ) {
        let ids = Array(Set(deviceIds))
        guard !ids.isEmpty else { return ([:], [:], [:]) }
        let logger = self.logger
        return try await database.withConnection { connection in
            let rows = try await connection.execute(SnapshotStatement(ids: ids), logger: logger)
            var fixes: [String: LocationFix] = [:]
            var states: [String: DeviceRegionState] = [:]
            var zones: [String: [ZoneOfInterest]] = [:]
            for try await (id, kind, body, _, time, lat, lng, accuracy, context, received, extras) in rows {
                switch kind {
                case 2:
                    guard let time, let lat, let lng, let received else { continue }
                    fixes[id] = PostgresFixStore.fix(
                        id: id, time: time, latitude: lat, longitude: lng, accuracy: accuracy, context: context,
                        received: received, extras: extras)
                case 0: states[id] = try LocationCodec.regionState(body ?? "")
                default: zones[id, default: []].append(try LocationCodec.zoi(body ?? ""))
                }
            }
            return (fixes, states, zones)
        }
    }
}

/// The snapshot read, prepared once per connection (PostgreSQL plans it once instead of per batch).
struct SnapshotStatement: PostgresPreparedStatement {
    static let name = "enrich_device_snapshots_v2"
    /// The last fix of each device is one probe of the primary key, backwards (`LIMIT 1` per device): its cost
    /// does not grow with the device's history, and no table statistics can turn it into a scan.
    static let sql = """
        SELECT u.id, 2::int8 AS kind, NULL::text AS body, 0::int8 AS position,
               f.fix_time, f.latitude, f.longitude, f.horizontal_accuracy, f.context, f.received_at, f.extras
        FROM unnest($1::text[]) AS u(id)
        CROSS JOIN LATERAL (
            SELECT fix_time, latitude, longitude, horizontal_accuracy, context, received_at, extras FROM fixes
            WHERE device_id = u.id ORDER BY fix_time DESC LIMIT 1) AS f
        UNION ALL
        SELECT device_id, 0::int8, body, 0::int8, NULL::float8, NULL::float8, NULL::float8, NULL::float8,
               NULL::text, NULL::float8, NULL::text
        FROM region_state WHERE device_id = ANY($1::text[])
        UNION ALL
        SELECT device_id, 1::int8, body, position::int8, NULL::float8, NULL::float8, NULL::float8, NULL::float8,
               NULL::text, NULL::float8, NULL::text
        FROM zois WHERE device_id = ANY($1::text[]) AND period IN ('HOME_PERIOD', 'WORK_PERIOD')
        ORDER BY 1, 2, 4
        """
    typealias Row = (String, Int, String?, Int, Double?, Double?, Double?, Double?, String?, Double?, String?)

    var ids: [String]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(ids)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}
