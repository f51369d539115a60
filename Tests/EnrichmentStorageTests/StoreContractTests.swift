import EnrichmentCore
import EnrichmentPostgres
import EnrichmentRuntime
import EnrichmentStorage
import Essentials
import Foundation
import TestSupport
import Testing

/// A fresh database file in a temporary folder, removed when the test's scope ends.
final class TemporaryDatabase {
    let directory: URL
    var path: String { directory.appendingPathComponent("test.sqlite").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "enrichment-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// Every store implementation the contract runs against (PostgreSQL joins here when it exists).
enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
    /// The SQLite stores on their own.
    case sqlite
    /// The stores exactly as the service wires them (`EnrichmentRuntime`: the last-fix cache over SQLite).
    case service
    /// The PostgreSQL stores, each test on a database of its own.
    case postgres
    var testDescription: String { rawValue }

    func makeStores(_ temp: TemporaryDatabase) async throws -> (any FixStore, any POIStore) {
        switch self {
        case .sqlite:
            let database = try SQLiteDatabase(path: temp.path)
            return (SQLiteFixStore(database: database), SQLitePOIStore(database: database))
        case .service:
            var configuration = ServiceConfiguration()
            configuration.databasePath = temp.path
            let runtime = try await EnrichmentRuntime.open(configuration, scope: .storage)
            return (runtime.fixes, runtime.pois)
        case .postgres:
            let database = try await PostgresTestDatabase.open()
            return (PostgresFixStore(database: database), PostgresPOIStore(database: database))
        }
    }
}

func fix(_ device: String, _ time: Double, lat: Double = 1, lng: Double = 2, received: Double = 0) -> LocationFix {
    LocationFix(
        deviceId: device, coordinate: Coordinate(latitude: lat, longitude: lng), fixTime: time, receivedAt: received)
}

@Suite("Store contract")
struct StoreContractTests {
    @Test("the last fix is the newest by fix time, not by arrival", arguments: StoreKind.allCases)
    func lastFixByFixTime(kind: StoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (fixes, _) = try await kind.makeStores(temp)
        try await fixes.insert([fix("d1", 100, lat: 10), fix("d1", 300, lat: 30), fix("d1", 200, lat: 20)])
        // A later batch carrying an older fix must not become the last fix.
        try await fixes.insert([fix("d1", 250, lat: 25, received: 999)])
        let latest = try await fixes.latestFix(deviceId: "d1")
        #expect(latest?.fixTime == 300)
        #expect(latest?.coordinate.latitude == 30)
        try await fixes.insert([fix("d1", 301, lat: 31)])
        #expect(try await fixes.latestFix(deviceId: "d1")?.coordinate.latitude == 31)
    }

    @Test("devices are isolated, and delete removes only that device", arguments: StoreKind.allCases)
    func isolationAndDelete(kind: StoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (fixes, _) = try await kind.makeStores(temp)
        try await fixes.insert([fix("a", 1), fix("a", 2), fix("b", 3)])
        #expect(try await fixes.latestFix(deviceId: "a")?.fixTime == 2)
        #expect(try await fixes.deleteDevice("a") == 2)
        #expect(try await fixes.latestFix(deviceId: "a") == nil)
        #expect(try await fixes.latestFix(deviceId: "b")?.fixTime == 3)
        #expect(try await fixes.deleteDevice("missing") == 0)
    }

    @Test("a fix with the same device and time replaces the earlier one", arguments: StoreKind.allCases)
    func sameTimeReplaces(kind: StoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (fixes, _) = try await kind.makeStores(temp)
        try await fixes.insert([fix("d", 5, lat: 1, received: 10)])
        // The same fix again (a retried upload): left as it is, first arrival kept (read before and after, so a
        // cache in front of the store is checked too).
        #expect(try await fixes.latestFix(deviceId: "d")?.receivedAt == 10)
        try await fixes.insert([fix("d", 5, lat: 1, received: 20)])
        #expect(try await fixes.latestFix(deviceId: "d")?.receivedAt == 10)
        try await fixes.insert([fix("d", 5, lat: 2, received: 30)])
        #expect(try await fixes.latestFix(deviceId: "d")?.coordinate.latitude == 2)
        #expect(try await fixes.latestFix(deviceId: "d")?.receivedAt == 30)
        var withAccuracy = fix("d", 5, lat: 2, received: 40)
        withAccuracy.horizontalAccuracy = 8
        try await fixes.insert([withAccuracy])
        #expect(try await fixes.latestFix(deviceId: "d")?.horizontalAccuracy == 8)
        #expect(try await fixes.latestFix(deviceId: "d")?.receivedAt == 40)
        #expect(try await fixes.deleteDevice("d") == 1)
    }

    @Test(
        "an insert tells each device's newest fix before the batch's first, as stored before the batch; accuracy and extras round-trip, none stays none",
        arguments: StoreKind.allCases)
    func insertReportingPrior(kind: StoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (fixes, _) = try await kind.makeStores(temp)
        var earlier = fix("a", 100, lat: 10)
        earlier.horizontalAccuracy = 12.5
        earlier.context = "walking"
        earlier.extras = .object(["speed": .double(1.5), "wifi_ssid": .string("cafe")])
        try await fixes.insert([earlier, fix("a", 200, lat: 20), fix("b", 50), fix("e", 100), fix("e", 200)])
        // a: the batch starts at 150 (and holds 300): its prior is 100, not the stored 200 nor the batch's own.
        // b: nothing before 40. c: never seen. e: the batch sends its stored 200 again first: strictly before it, 100.
        let prior = try #require(
            try await fixes.insertReportingPrior([
                fix("a", 300, lat: 30), fix("a", 150, lat: 15), fix("b", 40), fix("c", 10), fix("c", 10, lat: 9),
                fix("e", 200), fix("e", 250),
            ]))
        #expect(prior.byDevice.count == 4)
        #expect((prior.byDevice["e"] ?? nil)?.fixTime == 100)
        let a = try #require(prior.byDevice["a"] ?? nil)
        #expect(a.fixTime == 100)
        #expect(a.coordinate.latitude == 10)
        #expect(a.horizontalAccuracy == 12.5)
        #expect(a.context == "walking")
        #expect(a.extras == earlier.extras)
        #expect(prior.byDevice["b"] == .some(nil))
        #expect(prior.byDevice["c"] == .some(nil))
        // SQLite also says whose newest stored fix is now the batch's: not b's (its 40 is older than the stored 50).
        if kind != .postgres {
            #expect(Set(prior.latest.keys) == ["a", "c", "e"])
            #expect(prior.latest["a"]?.fixTime == 300)
            #expect(prior.latest["c"]?.coordinate.latitude == 9)
            #expect(prior.latest["e"]?.fixTime == 250)
        }
        // Stored as sent: a repeated (device, time) keeps the later; no accuracy stays none.
        let c = try await fixes.latestFix(deviceId: "c")
        #expect(c?.coordinate.latitude == 9)
        #expect(c?.horizontalAccuracy == nil)
        #expect(try await fixes.latestFix(deviceId: "a")?.fixTime == 300)
        #expect(try await fixes.fix(deviceId: "a", before: 150)?.fixTime == 100)
        // A device already looked up (in the service's cache), then two fixes of one time in a batch: the last
        // stands, in the store and in the cache.
        #expect(try await fixes.latestFix(deviceId: "b")?.fixTime == 50)
        _ = try await fixes.insertReportingPrior([fix("b", 60, lat: 1), fix("b", 60, lat: 2)])
        #expect(try await fixes.latestFix(deviceId: "b")?.coordinate.latitude == 2)
        try await fixes.insert([fix("b", 70, lat: 3), fix("b", 70, lat: 4)])
        #expect(try await fixes.latestFix(deviceId: "b")?.coordinate.latitude == 4)
    }

    @Test("PostgreSQL refusing a batch for its data (a NUL byte in text) is told apart from an outage")
    func dataRefusal() async throws {
        let temp = try TemporaryDatabase()
        let (fixes, _) = try await StoreKind.postgres.makeStores(temp)
        var bad = fix("n", 1)
        bad.context = "a\u{0}b"
        let error = await #expect(throws: (any Error).self) { try await fixes.insert([fix("m", 1), bad]) }
        #expect(error.map { StorageHealth.refusesData($0) } == true)
        #expect(error.flatMap { StorageHealth.outage(in: $0) } == nil)
        // Nothing of the refused statement was stored.
        #expect(try await fixes.latestFix(deviceId: "m") == nil)
    }

    @Test("POIs upsert by store id and keep every field", arguments: StoreKind.allCases)
    func poiUpsert(kind: StoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, pois) = try await kind.makeStores(temp)
        let original = POI(
            storeId: "s1", name: "One", coordinate: Coordinate(latitude: 1, longitude: 1),
            address: POI.Address(lines: ["l1", "l2"], countryCode: "FR", city: "Paris", zipcode: "75001"),
            types: ["cafe"], tags: ["open"], contact: .object(["phone": .string("+33")]),
            userProperties: .object(["k": .int(1)]))
        #expect(try await pois.upsert([original]) == 1)
        var moved = original
        moved.name = "One bis"
        moved.coordinate = Coordinate(latitude: 2, longitude: 2)
        _ = try await pois.upsert([
            moved, POI(storeId: "s2", name: "Two", coordinate: Coordinate(latitude: 3, longitude: 3)),
        ])
        #expect(try await pois.count() == 2)
        let all = try await pois.all()
        #expect(all.first { $0.storeId == "s1" } == moved)
        // The R*Tree moved with the row.
        let near = try await pois.nearest(to: Coordinate(latitude: 2, longitude: 2), query: PlacesQuery(limit: 1))
        #expect(near.first?.poi.storeId == "s1")
        #expect(near.first?.distance == 0)
    }

    @Test("R*Tree nearest-k agrees with brute-force haversine", arguments: StoreKind.allCases)
    func rtreeNearest(kind: StoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, store) = try await kind.makeStores(temp)
        var generator = SeededGenerator(seed: 3)
        var all: [POI] = []
        for (i, center) in [
            Coordinate(latitude: 48.85, longitude: 2.35), Coordinate(latitude: -33.86, longitude: 151.2),
            Coordinate(latitude: 10, longitude: 179.9),
        ].enumerated() {
            for j in 0..<400 {
                all.append(
                    POI(
                        storeId: "c\(i)-\(j)", name: "",
                        coordinate: Coordinate(
                            latitude: center.latitude + Double.random(in: -0.3...0.3, using: &generator),
                            longitude: (center.longitude + Double.random(in: -0.3...0.3, using: &generator))
                                .wrappedLongitude),
                        types: j % 2 == 0 ? ["cafe"] : ["bank"]))
            }
        }
        _ = try await store.upsert(all)
        let queries = [
            PlacesQuery(limit: 5), PlacesQuery(limit: 3, radius: 500),
            PlacesQuery(limit: 4, filter: PlaceFilter.anyOf(.type, ["bank"])),
        ]
        for _ in 0..<40 {
            let base = all[Int.random(in: 0..<all.count, using: &generator)].coordinate
            let point = Coordinate(latitude: base.latitude + 0.01, longitude: (base.longitude + 0.01).wrappedLongitude)
            for query in queries {
                let expected = all.filter(query.accepts)
                    .map { PlaceMatch(poi: $0, distance: point.distance(to: $0.coordinate)) }
                    .filter { query.radius == nil || $0.distance <= query.radius! }
                    .sorted { ($0.distance, $0.poi.storeId) < ($1.distance, $1.poi.storeId) }.prefix(query.limit).map(
                        \.poi.storeId)
                #expect(try await store.nearest(to: point, query: query).map(\.poi.storeId) == expected)
            }
        }
    }
}

@Suite("SQLite specifics")
struct SQLiteSpecificTests {
    @Test("the database runs in WAL mode")
    func walMode() throws {
        let temp = try TemporaryDatabase()
        #expect(try SQLiteDatabase(path: temp.path).journalMode() == "wal")
    }

    @Test("fixes survive closing and reopening the file, and migrations are idempotent")
    func reopen() async throws {
        let temp = try TemporaryDatabase()
        do {
            let store = SQLiteFixStore(database: try SQLiteDatabase(path: temp.path))
            try await store.insert([fix("d", 42, lat: 4)])
        }
        let reopened = SQLiteFixStore(database: try SQLiteDatabase(path: temp.path))
        #expect(try await reopened.latestFix(deviceId: "d")?.fixTime == 42)
    }

    @Test("a folder that does not exist yet is created")
    func createsFolder() throws {
        let temp = try TemporaryDatabase()
        let nested = temp.directory.appendingPathComponent("a/b/c.sqlite").path
        _ = try SQLiteDatabase(path: nested)
        #expect(FileManager.default.fileExists(atPath: nested))
    }
}

extension Double {
    var wrappedLongitude: Double { self > 180 ? self - 360 : (self < -180 ? self + 360 : self) }
}

@Suite("POI store: get and delete by store id")
struct POIGetDeleteContractTests {
    @Test(
        "a POI is read back by store id and deleted from the store and its spatial search",
        arguments: StoreKind.allCases)
    func getAndDelete(kind: StoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, pois) = try await kind.makeStores(temp)
        let a = POI(storeId: "a", name: "Alpha", coordinate: Coordinate(latitude: 48, longitude: 2), types: ["cafe"])
        let b = POI(storeId: "b", name: "Beta", coordinate: Coordinate(latitude: 48.001, longitude: 2))
        _ = try await pois.upsert([a, b])
        #expect(try await pois.poi(storeId: "a") == a)
        #expect(try await pois.poi(storeId: "zz") == nil)
        #expect(try await pois.delete(storeIds: ["a", "zz"]) == 1)
        #expect(try await pois.poi(storeId: "a") == nil)
        #expect(try await pois.count() == 1)
        let near = try await pois.nearest(to: a.coordinate, query: PlacesQuery(limit: 5))
        #expect(near.map(\.poi.storeId) == ["b"])
        #expect(try await pois.delete(storeIds: ["a"]) == 0)
    }
}
