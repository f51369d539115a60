import EnrichmentCore
import EnrichmentPostgres
import EnrichmentStorage
import Essentials
import Foundation
import GRDB
import LocationCore
import PostgresNIO
import TestSupport
import Testing

/// Polygon regions in both stores (issue 47): no schema change, the region's document gains its vertices, and a
/// region written before polygons existed reads back as the circle it was.
@Suite("Polygon regions in the stores")
struct PolygonRegionStoreTests {
    /// A store of `kind` with a way to write a region row as an older version of the service did.
    static func store(_ kind: LocationStoreKind, _ temp: TemporaryDatabase) async throws -> (
        store: any LocationStore, writeRow: @Sendable (String, String) async throws -> Void
    ) {
        switch kind {
        case .sqlite:
            let database = try SQLiteDatabase(path: temp.path)
            return (
                SQLiteLocationStore(database: database),
                { id, body in
                    try await database.pool.write { db in
                        try db.execute(sql: "INSERT INTO regions (id, body) VALUES (?, ?)", arguments: [id, body])
                    }
                }
            )
        case .postgres:
            let backend = try await PostgresTestDatabase.open()
            return (
                PostgresLocationStore(database: backend),
                { id, body in
                    _ = try await backend.client.query(
                        "INSERT INTO regions (id, body) VALUES (\(id), \(body))", logger: PostgresTestDatabase.logger)
                }
            )
        }
    }

    @Test(
        "a polygon region is put, replaced, listed and deleted with its vertices exact",
        arguments: LocationStoreKind.allCases)
    func polygonRoundTrip(kind: LocationStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (store, _) = try await Self.store(kind, temp)
        let vertices = PolygonOracle.star.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) }
        var region = Region.polygonal(
            id: "custom_star", polygon: GeoPolygon(unchecked: vertices), wifiSSID: "Stadium", policy: .either,
            pushPayload: .object(["aps": .object(["alert": .string("hi")])]))
        #expect(try await store.putRegion(region) == true)
        let listed = try await store.regions()
        #expect(listed == [region])
        // Every vertex's bits, in order (the star's are not short decimals).
        #expect(
            listed.first?.polygon?.vertices.map { [$0.latitude.bitPattern, $0.longitude.bitPattern] }
                == vertices.map { [$0.latitude.bitPattern, $0.longitude.bitPattern] })
        // Replaced by a circle of the same id: the polygon goes.
        region = Region(id: "custom_star", latitude: 48.85, longitude: 2.33, radius: 300)
        #expect(try await store.putRegion(region) == false)
        #expect(try await store.regions().first?.polygon == nil)
        #expect(try await store.deleteRegion(id: "custom_star") == true)
        #expect(try await store.regions().isEmpty)
    }

    @Test(
        "a circle stored before polygons reads back as that circle and keeps its inside rule",
        arguments: LocationStoreKind.allCases)
    func circleFromBefore(kind: LocationStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (store, writeRow) = try await Self.store(kind, temp)
        // The document exactly as the previous version wrote it (no shape, no polygon).
        try await writeRow(
            "custom_old", #"{"id":"custom_old","latitude":48,"longitude":2,"radius":100,"policy":"circle"}"#)
        let region = try #require(try await store.regions().first)
        #expect(region == Region(id: "custom_old", latitude: 48, longitude: 2, radius: 100, policy: .circle))
        #expect(region.shape == "circle")
        let metresPerDegree = 6_371_008.8 * Double.pi / 180
        func fix(metresNorth: Double, accuracy: Double) -> LocationFix {
            LocationFix(
                deviceId: "d", coordinate: Coordinate(latitude: 48 + metresNorth / metresPerDegree, longitude: 2),
                fixTime: 0, horizontalAccuracy: accuracy, receivedAt: 0)
        }
        // §4.5 rule 2, strict: 120 m with 20 m accuracy is out, with 20.5 m in.
        #expect(!region.contains(fix(metresNorth: 120, accuracy: 20), wifiSSID: nil, wifiBSSID: nil))
        #expect(region.contains(fix(metresNorth: 120, accuracy: 20.5), wifiSSID: nil, wifiBSSID: nil))
    }
}
