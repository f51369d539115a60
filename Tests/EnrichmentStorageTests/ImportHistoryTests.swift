import EnrichmentCore
import EnrichmentPostgres
import EnrichmentStorage
import Foundation
import LocationCore
import TestSupport
import Testing

/// A location store that can import history in bulk (both stores; not part of `LocationStore`).
protocol HistoryImporting: LocationStore, AudienceHistory {
    func importHistory(_ devices: [(deviceId: String, visits: [Visit], zois: [ZoneOfInterest])]) async throws
}

extension SQLiteLocationStore: HistoryImporting {}
extension PostgresLocationStore: HistoryImporting {}

@Suite("Bulk import of visits and zones")
struct ImportHistoryTests {
    typealias History = (deviceId: String, visits: [Visit], zois: [ZoneOfInterest])

    /// A fresh, empty store of `kind` (each call its own file or database).
    static func store(_ kind: LocationStoreKind, _ temp: TemporaryDatabase) async throws -> any HistoryImporting {
        switch kind {
        case .sqlite: SQLiteLocationStore(database: try SQLiteDatabase(path: temp.path))
        case .postgres: PostgresLocationStore(database: try await PostgresTestDatabase.open())
        }
    }

    static func zone(_ id: String, _ period: String?, latitude: Double, longitude: Double) -> ZoneOfInterest {
        var weekly = Array(repeating: 0.0, count: 168)
        weekly[25] = 0.125
        return ZoneOfInterest(
            id: id, meanX: SphericalMercator.lon2x(longitude), meanY: SphericalMercator.lat2y(latitude),
            inverse: [1 / 40_000, 0, 0, 1 / 40_000], det: 1.6e9, prior: 0.5, accumulator: 12, age: 0,
            visitIds: ["\(id)-v"], startTime: 1_000, endTime: 90_000, duration: 36_000, weeklyDensity: weekly,
            period: period, wktPolygon: "")
    }

    /// Four devices around Paris (one with no zones, one with no visits, one listed twice) and what they had before.
    static func histories() -> (before: [History], imported: [History]) {
        var imported: [History] = []
        for index in 0..<4 {
            let id = "d\(index)"
            let base = Coordinate(latitude: 48.85 + Double(index) * 0.0137, longitude: 2.33 + Double(index) * 0.0211)
            let count = index == 2 ? 0 : 3 + index
            let visits = (0..<count).map { (k: Int) -> Visit in
                let step = Double(k)
                return Visit(
                    id: "\(id)-v\(k)", deviceId: id, arrival: 10_000 + step * 86_400,
                    departure: 13_600 + step * 86_400, latitude: base.latitude + step * 0.00037,
                    longitude: base.longitude - step * 0.00051, horizontalAccuracy: 20,
                    recordedAt: 13_600 + step * 86_400, source: k == 0 ? "detected" : "reported")
            }
            let zois =
                index == 1
                ? []
                : [
                    zone("\(id)-home", ZOIPeriod.home, latitude: base.latitude + 0.004, longitude: base.longitude),
                    zone("\(id)-work", ZOIPeriod.work, latitude: base.latitude, longitude: base.longitude + 0.02),
                    zone("\(id)-other", nil, latitude: base.latitude - 0.003, longitude: base.longitude - 0.001),
                ]
            imported.append((id, visits, zois))
        }
        // d3 again: more visits, and zones that replace the first entry's.
        let extra = Visit(
            id: "d3-extra", deviceId: "d3", arrival: 500_000, departure: 503_600, latitude: 48.9, longitude: 2.4,
            horizontalAccuracy: 15, recordedAt: 503_600)
        imported.append(("d3", [extra], [zone("d3-home2", ZOIPeriod.home, latitude: 48.91, longitude: 2.41)]))
        // d0 already had a visit and zones (the import appends to the one and replaces the others).
        let earlier = Visit(
            id: "d0-earlier", deviceId: "d0", arrival: 1_000, departure: 2_000, latitude: 48.8, longitude: 2.3,
            horizontalAccuracy: 10, recordedAt: 2_000)
        let before: [History] = [("d0", [earlier], [zone("d0-old", ZOIPeriod.home, latitude: 48.7, longitude: 2.2)])]
        return (before, imported)
    }

    /// Each history through `updateVisits`, one run per entry, as the visit pipeline would write it.
    static func update(_ store: any HistoryImporting, _ histories: [History]) async throws {
        for history in histories {
            try await store.updateVisits(deviceId: history.deviceId) { _ in
                (DeviceVisitsChange(newVisits: history.visits, zois: history.zois, events: []), ())
            }
        }
    }

    @Test(
        "importHistory stores what updateVisits stores for the same visits and zones",
        arguments: LocationStoreKind.allCases)
    func sameAsUpdateVisits(kind: LocationStoreKind) async throws {
        let (tempA, tempB) = (try TemporaryDatabase(), try TemporaryDatabase())
        let imported = try await Self.store(kind, tempA)
        let updated = try await Self.store(kind, tempB)
        let (before, histories) = Self.histories()
        try await Self.update(imported, before)
        try await Self.update(updated, before)
        try await imported.importHistory(histories)
        try await Self.update(updated, histories)

        var places: [Coordinate] = []
        for id in ["d0", "d1", "d2", "d3", "nobody"] {
            let visits = try await imported.visits(deviceId: id)
            let zois = try await imported.zois(deviceId: id)
            #expect(visits == (try await updated.visits(deviceId: id)), "\(id)")
            #expect(zois == (try await updated.zois(deviceId: id)), "\(id)")
            places += visits.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) }
            places += zois.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) }
        }
        #expect(try await imported.visits(deviceId: "d0").map(\.id) == ["d0-earlier", "d0-v0", "d0-v1", "d0-v2"])
        #expect(try await imported.zois(deviceId: "d0").map(\.id) == ["d0-home", "d0-work", "d0-other"])
        #expect(try await imported.zois(deviceId: "d3").map(\.id) == ["d3-home2"])
        #expect(try await imported.visits(deviceId: "d3").count == 7)

        // The audience reads, which go through the cell columns: around every stored visit and zone, found alike.
        func sorted(_ zones: [ZoneCentre]) -> [ZoneCentre] {
            zones.sorted { ($0.deviceId, $0.coordinate.latitude) < ($1.deviceId, $1.coordinate.latitude) }
        }
        func sorted(_ visits: [VisitPlace]) -> [VisitPlace] {
            visits.sorted { ($0.deviceId, $0.arrival) < ($1.deviceId, $1.arrival) }
        }
        for place in places {
            let zoneCells = AudienceArea.circle(center: place, radius: 50).cellRanges
            let zones = sorted(try await imported.zoneCentres(inCells: zoneCells))
            #expect(zones == sorted(try await updated.zoneCentres(inCells: zoneCells)))
            let visitCells = VisitCells.grid.ranges(center: place, radius: 50)
            let visits = sorted(try await imported.visitPlaces(inCells: visitCells, from: 0, to: 1e9))
            #expect(visits == sorted(try await updated.visitPlaces(inCells: visitCells, from: 0, to: 1e9)))
            #expect(!zones.isEmpty || !visits.isEmpty, "nothing found around \(place)")
        }
        let everywhere = [Int64.min...Int64.max]
        #expect(try await imported.zoneCentres(inCells: everywhere).count == 7)
        #expect(try await imported.visitPlaces(inCells: everywhere, from: 0, to: 1e9).count == 15)
    }
}
