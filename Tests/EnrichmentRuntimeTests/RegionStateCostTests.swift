import EnrichmentCore
import EnrichmentPostgres
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore
import TestSupport
import Testing

/// Region state is kept only where it says something (issue 28): a device far from every region costs no row, a
/// device inside one costs one, and the row goes once nothing is left to say. POI regions keep the §4.3 rule that
/// a region not monitored at the fix before is entered "on creation".
@Suite("Region state only where it says something")
struct RegionStateCostTests {
    static func open(postgres: Bool = false, _ adjust: (inout ServiceConfiguration) -> Void = { _ in })
        async throws -> (EnrichmentRuntime, URL)
    {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rsc-\(UUID().uuidString)")
        var configuration = ServiceConfiguration()
        configuration.databasePath = directory.appendingPathComponent("db.sqlite").path
        if postgres {
            configuration.databaseURL = Secret(try await PostgresTestDatabase.makeURL())
            // Few connections: the tests share one cluster with every other PostgreSQL test running alongside.
            configuration.databasePoolSize = 2
        }
        configuration.location.detectVisits = false
        adjust(&configuration)
        return (try await EnrichmentRuntime.open(configuration), directory)
    }

    static func fix(_ device: String, _ t: Double, _ point: Coordinate, accuracy: Double = 0) -> LocationFix {
        LocationFix(deviceId: device, coordinate: point, fixTime: t, horizontalAccuracy: accuracy, receivedAt: t)
    }

    /// `metres` north of `point`.
    static func north(_ point: Coordinate, _ metres: Double) -> Coordinate {
        Coordinate(
            latitude: point.latitude + metres / (Coordinate.earthRadius * Double.pi / 180), longitude: point.longitude)
    }

    /// As the route does: the store tells what it knew of the devices' earlier fixes (both stores do, in the
    /// insert's own trip).
    func ingest(_ runtime: EnrichmentRuntime, _ fixes: [LocationFix]) async throws -> Int {
        let prior = try await runtime.fixes.insertReportingPrior(fixes)
        #expect(prior != nil)
        return try await runtime.location.ingested(fixes, prior: prior)
    }

    @Test(
        "far devices leave no row; inside leaves one holding the POI region; leaving removes it after 5 s",
        arguments: [false, true])
    func rowsOnlyWhereSomethingIsSaid(postgres: Bool) async throws {
        let (runtime, directory) = try await Self.open(postgres: postgres)
        defer {
            runtime.postgres?.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let poi = try #require(try await runtime.pois.all().first)
        let t = 1_700_000_000.0
        // 200 devices 300 km from the nearest sample POI.
        let far = (0..<200).map {
            Self.fix("far\($0)", t, Coordinate(latitude: -40, longitude: -70 + Double($0) * 1e-4))
        }
        #expect(try await ingest(runtime, far) == 0)
        #expect(try await runtime.location.store.storedRegionStateCount() == 0)

        // Inside the POI's region: an enter, and a row that holds that region alone.
        #expect(try await ingest(runtime, [Self.fix("in", t, Self.north(poi.coordinate, 40))]) == 1)
        #expect(try await runtime.location.store.storedRegionStateCount() == 1)
        var states = try await runtime.location.store.readRegionStates(deviceIds: ["in"]).states
        #expect(states["in"]?.poiRegions.map(\.id) == ["poi_\(poi.storeId)_\(poi.name) - 100.0 m"])
        #expect(states["in"]?.inside.count == 1)

        // Out (the nearest POI is still that one): an exit; the exit log stays for the 5 s rule.
        #expect(try await ingest(runtime, [Self.fix("in", t + 60, Self.north(poi.coordinate, 400))]) == 1)
        states = try await runtime.location.store.readRegionStates(deviceIds: ["in"]).states
        #expect(states["in"]?.inside.isEmpty == true)
        #expect(states["in"]?.logs.isEmpty == false)
        // Past 5 s the exit says nothing more: the row goes.
        #expect(try await ingest(runtime, [Self.fix("in", t + 70, Self.north(poi.coordinate, 450))]) == 0)
        #expect(try await runtime.location.store.storedRegionStateCount() == 0)
        let events = try #require(try await runtime.location.events(deviceId: "in", limit: 10))
        #expect(events.map(\.type) == ["region_enter", "region_exit"])
    }

    @Test(
        "a POI region monitored at the fix before is entered by position, one that was not on creation",
        arguments: [false, true])
    func enteredOnCreationOnlyWhenNew(postgres: Bool) async throws {
        let (runtime, directory) = try await Self.open(postgres: postgres)
        defer {
            runtime.postgres?.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let poi = try #require(try await runtime.pois.all().first)
        let t = 1_700_000_000.0
        // 150 m away (its nearest POI, not inside), then, in another batch, 50 m away: the region was monitored
        // at the fix before (read back from the store), so the enter comes from the position check.
        _ = try await ingest(runtime, [Self.fix("a", t, Self.north(poi.coordinate, 150))])
        _ = try await ingest(runtime, [Self.fix("a", t + 30, Self.north(poi.coordinate, 50))])
        let a = try #require(try await runtime.location.events(deviceId: "a", limit: 10))
        #expect(a.map(\.type) == ["region_enter"])
        #expect(a.first?.fields["from_position_detection"] == .bool(true))

        // From far away straight inside: the region is new, entered on creation.
        _ = try await ingest(runtime, [Self.fix("b", t, Coordinate(latitude: -40, longitude: -70))])
        _ = try await ingest(runtime, [Self.fix("b", t + 30, Self.north(poi.coordinate, 50))])
        let b = try #require(try await runtime.location.events(deviceId: "b", limit: 10))
        #expect(b.map(\.type) == ["region_enter"])
        #expect(b.first?.fields["from_position_detection"] == .bool(false))
    }

    @Test("after a restart the devices that have state are read again: an exit is still seen")
    func stateSurvivesARestart() async throws {
        let (runtime, directory) = try await Self.open()
        defer { try? FileManager.default.removeItem(at: directory) }
        let poi = try #require(try await runtime.pois.all().first)
        let t = 1_700_000_000.0
        #expect(try await ingest(runtime, [Self.fix("r", t, Self.north(poi.coordinate, 40))]) == 1)
        var configuration = runtime.configuration
        configuration.databasePath = directory.appendingPathComponent("db.sqlite").path
        let again = try await EnrichmentRuntime.open(configuration)
        #expect(try await ingest(again, [Self.fix("r", t + 60, Self.north(poi.coordinate, 400))]) == 1)
        let events = try #require(try await again.location.events(deviceId: "r", limit: 10))
        #expect(events.map(\.type) == ["region_enter", "region_exit"])
    }

    @Test("the last-fix cache at its budget forgets the least recently used and reads them back from the database")
    func lastFixCacheEvicts() async throws {
        let (runtime, directory) = try await Self.open { $0.deviceMemory = 10 }
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = try #require(runtime.fixes as? CachingFixStore)
        let t = 1_700_000_000.0
        let fixes = (0..<100).map { Self.fix("d\($0)", t + Double($0), Coordinate(latitude: 48, longitude: 2)) }
        try await runtime.fixes.insert(fixes)
        for fix in fixes { #expect(try await runtime.fixes.latestFix(deviceId: fix.deviceId)?.fixTime == fix.fixTime) }
        #expect(cache.cachedDevices <= 10)
        #expect(cache.evictions >= 90)
        // A newer fix for an evicted device: the read after eviction is the database's, and current.
        try await runtime.fixes.insert([Self.fix("d0", t + 1000, Coordinate(latitude: 49, longitude: 2))])
        #expect(try await runtime.fixes.latestFix(deviceId: "d0")?.coordinate.latitude == 49)
        let batch = try await runtime.fixes.latestFixes(deviceIds: fixes.map(\.deviceId))
        #expect(batch.count == 100)
        #expect(batch["d5"]?.fixTime == t + 5)
    }
}
