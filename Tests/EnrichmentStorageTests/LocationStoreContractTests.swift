import EnrichmentCore
import EnrichmentPostgres
import EnrichmentStorage
import Essentials
import Foundation
import LocationCore
import TestSupport
import Testing

/// Every implementation of the location stores: SQLite and PostgreSQL.
enum LocationStoreKind: String, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres
    var testDescription: String { rawValue }

    func make(_ temp: TemporaryDatabase) async throws -> (any LocationStore, any FixStore) {
        switch self {
        case .sqlite:
            let database = try SQLiteDatabase(path: temp.path)
            return (SQLiteLocationStore(database: database), SQLiteFixStore(database: database))
        case .postgres:
            let database = try await PostgresTestDatabase.open()
            return (PostgresLocationStore(database: database), PostgresFixStore(database: database))
        }
    }
}

private func visit(_ id: String, _ t: Double, lat: Double = 48, recorded: Double? = nil) -> Visit {
    Visit(
        id: id, deviceId: "d", arrival: t, departure: t + 3600, latitude: lat, longitude: 2, horizontalAccuracy: 10,
        recordedAt: recorded ?? t + 3600)
}

/// Integers as doubles, so a number compares equal however JSON spelled it.
func normalized(_ value: JSONValue) -> JSONValue {
    switch value {
    case .int(let number): .double(Double(number))
    case .array(let items): .array(items.map(normalized))
    case .object(let members): .object(members.mapValues(normalized))
    default: value
    }
}

@Suite("Location store contract")
struct LocationStoreContractTests {
    @Test("visits and ZOIs round-trip exactly, in order", arguments: LocationStoreKind.allCases)
    func visitsAndZOIs(kind: LocationStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (store, _) = try await kind.make(temp)
        let intake = VisitIntake(settings: LocationSettings(), makeId: { _ in UUID().uuidString })
        let visits = [visit("b", 1000), visit("a", 90_000), visit("c", 200_000, lat: 48.5)]
        let expected = intake.replaySample(visits)
        let count = try await store.updateVisits(deviceId: "d") { state in
            #expect(state.visits.isEmpty)
            return (DeviceVisitsChange(newVisits: visits, zois: expected, events: []), state.visits.count)
        }
        #expect(count == 0)
        #expect(try await store.visits(deviceId: "d").map(\.id) == ["b", "a", "c"])
        #expect(try await store.visits(deviceId: "d") == visits)
        // Bit-exact: every double, the 168 bins, the ids and the polygon.
        #expect(try await store.zois(deviceId: "d") == expected)
        #expect(try await store.zois(deviceId: "other").isEmpty)
        #expect(try await store.knowsDevice("d"))
        #expect(try await store.knowsDevice("other") == false)
    }

    @Test("a failing run writes nothing", arguments: LocationStoreKind.allCases)
    func failingRun(kind: LocationStoreKind) async throws {
        struct Boom: Error {}
        let temp = try TemporaryDatabase()
        let (store, _) = try await kind.make(temp)
        await #expect(throws: Boom.self) {
            try await store.updateVisits(deviceId: "d") { _ -> (DeviceVisitsChange, Int) in throw Boom() }
        }
        #expect(try await store.visits(deviceId: "d").isEmpty)
    }

    @Test("concurrent runs of one device are serialised", arguments: LocationStoreKind.allCases)
    func serialised(kind: LocationStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (store, _) = try await kind.make(temp)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<20 {
                group.addTask {
                    _ = try await store.updateVisits(deviceId: "d") { state in
                        // Each run sees every earlier run's visit: ids stay unique, none is lost.
                        let next = visit("v\(state.visits.count)-\(i)", Double(i) * 10_000)
                        return (DeviceVisitsChange(newVisits: [next], zois: []), 0)
                    }
                }
            }
            try await group.waitForAll()
        }
        let ids = try await store.visits(deviceId: "d").map(\.id)
        #expect(ids.count == 20)
        #expect(Set(ids.map { $0.split(separator: "-")[0] }) == Set((0..<20).map { "v\($0)" }))
    }

    @Test("regions: put, replace, list, delete", arguments: LocationStoreKind.allCases)
    func regions(kind: LocationStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (store, _) = try await kind.make(temp)
        var region = Region(
            id: "custom_shop", latitude: 48, longitude: 2, radius: 50, wifiSSID: "Shop", policy: .wifi,
            pushPayload: .object(["aps": .object(["alert": .string("hi")])]))
        #expect(try await store.putRegion(region) == true)
        region.radius = 75
        #expect(try await store.putRegion(region) == false)
        #expect(try await store.regions() == [region])
        #expect(try await store.deleteRegion(id: "custom_shop") == true)
        #expect(try await store.deleteRegion(id: "custom_shop") == false)
        #expect(try await store.regions().isEmpty)
    }

    @Test("region state and events round-trip; zones come from classified ZOIs", arguments: LocationStoreKind.allCases)
    func regionState(kind: LocationStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (store, _) = try await kind.make(temp)
        var home = LocationSettings()
        home.classificationEnabled = false
        var zoi = VisitIntake(settings: home, makeId: { _ in "z1" }).replaySample([visit("a", 1000)])[0]
        zoi.period = ZOIPeriod.home
        var other = zoi
        other.id = "z2"
        other.period = ZOIPeriod.other
        let pair = [zoi, other]
        _ = try await store.updateVisits(deviceId: "d") { _ in
            (DeviceVisitsChange(newVisits: [visit("a", 1000)], zois: pair), 0)
        }
        let poi = Region(
            id: "poi_1_Shop - 100.0 m", latitude: 48, longitude: 2, radius: 100, extra: ["idstore": .string("1")])
        let state = DeviceRegionState(
            poiRegions: [poi], logs: ["custom_a": .init(didEnter: true, date: 12.5)], lastFixTime: 99)
        let event = LocationEvent.make(
            "region_enter", deviceId: "d", date: 12.5,
            fields: ["region_id": .string("custom_a"), "radius": .double(50)])
        try await store.updateRegionStates(deviceIds: ["d", "e"]) { states, zones in
            #expect(states.isEmpty)
            #expect(zones["d"]?.map(\.id) == ["z1"])
            return (["d": state], [event], ())
        }
        try await store.updateRegionStates(deviceIds: ["d"]) { states, _ in
            #expect(states["d"] == state)
            return (states, [], ())
        }
        let events = try await store.events(deviceId: "d", limit: 10)
        // JSON keeps numbers, not their Swift spelling: 50.0 reads back as 50.
        #expect(events.map { normalized($0.json) } == [normalized(event.json)])
        #expect(events.first?.name == "woos_geofence_entered_event")
    }

    @Test("PostgreSQL: one snapshot statement reads what the separate fix and region reads read")
    func snapshots() async throws {
        let database = try await PostgresTestDatabase.open()
        let store = PostgresLocationStore(database: database)
        let fixes = PostgresFixStore(database: database)
        var settings = LocationSettings()
        settings.classificationEnabled = false
        var zoi = VisitIntake(settings: settings, makeId: { _ in "z1" }).replaySample([visit("a", 1000)])[0]
        zoi.period = ZOIPeriod.work
        let work = zoi
        _ = try await store.updateVisits(deviceId: "both") { _ in
            (DeviceVisitsChange(newVisits: [visit("a", 1000)], zois: [work]), 0)
        }
        let state = DeviceRegionState(logs: ["custom_a": .init(didEnter: true, date: 12.5)], lastFixTime: 99)
        try await store.updateRegionStates(deviceIds: ["both", "state-only"]) { _, _ in
            (["both": state, "state-only": state], [], ())
        }
        let fix = { (device: String, time: Double, lat: Double) in
            LocationFix(
                deviceId: device, coordinate: Coordinate(latitude: lat, longitude: 2.5), fixTime: time,
                horizontalAccuracy: time == 20 ? nil : 8, context: time == 20 ? "ctx" : nil, receivedAt: time + 1,
                extras: time == 20 ? .object(["speed": .double(1.5)]) : nil)
        }
        try await fixes.insert([fix("both", 10, 48), fix("both", 20, 49), fix("fix-only", 5, 47)])

        let ids = ["both", "state-only", "fix-only", "nothing", "both"]
        let snapshot = try await store.readSnapshots(deviceIds: ids)
        let separate = try await (fixes.latestFixes(deviceIds: ids), store.readRegionStates(deviceIds: ids))
        #expect(snapshot.fixes == separate.0)
        #expect(snapshot.fixes["both"]?.fixTime == 20)
        #expect(snapshot.fixes["both"]?.extras == .object(["speed": .double(1.5)]))
        #expect(snapshot.fixes.keys.sorted() == ["both", "fix-only"])
        #expect(snapshot.states == separate.1.states)
        #expect(snapshot.states.keys.sorted() == ["both", "state-only"])
        #expect(snapshot.zones.mapValues { $0.map(\.id) } == ["both": ["z1"]])
        #expect(snapshot.zones.mapValues { $0.map(\.id) } == separate.1.zones.mapValues { $0.map(\.id) })
    }

    @Test("retention removes old visits from ZOIs and old events", arguments: LocationStoreKind.allCases)
    func retention(kind: LocationStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (store, _) = try await kind.make(temp)
        let intake = VisitIntake(settings: LocationSettings(), makeId: { _ in UUID().uuidString })
        let visits = [
            visit("old1", 1000), visit("old2", 90_000), visit("new", 200_000), visit("far", 300_000, lat: 49),
        ]
        let zois = intake.replaySample(visits)
        #expect(zois.count == 2)
        let old = LocationEvent.make("visit", deviceId: "d", date: 5000, fields: [:])
        let recent = LocationEvent.make("visit", deviceId: "d", date: 500_000, fields: [:])
        _ = try await store.updateVisits(deviceId: "d") { _ in
            (DeviceVisitsChange(newVisits: visits, zois: zois, events: [old, recent]), 0)
        }
        let cutoff = 100_000.0
        let (removedVisits, removedEvents) = try await store.expire(recordedAtOrBefore: cutoff) {
            FIGMM.removeVisits($1, from: $0, remaining: $2)
        }
        #expect(removedVisits == 2)
        #expect(removedEvents == 1)
        #expect(try await store.visits(deviceId: "d").map(\.id) == ["new", "far"])
        let kept = try await store.zois(deviceId: "d")
        #expect(kept.count == 2)
        #expect(kept[0].visitIds == ["new"])
        #expect(kept[0].meanX == zois[0].meanX)
        #expect(try await store.events(deviceId: "d", limit: 10) == [recent])
        #expect(try await store.deleteLocationData(deviceId: "d") == 2 + 2 + 1)
        #expect(try await store.knowsDevice("d") == false)
    }

    @Test("fixes keep OpenLocate's fields and read back after a time", arguments: LocationStoreKind.allCases)
    func fixExtras(kind: LocationStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, fixes) = try await kind.make(temp)
        let extras: JSONValue = .object([
            "speed": .double(1.5), "wifi_ssid": .string("Shop"), "is_charging": .bool(true),
        ])
        try await fixes.insert([
            LocationFix(deviceId: "d", coordinate: .init(latitude: 1, longitude: 2), fixTime: 10, receivedAt: 11),
            LocationFix(
                deviceId: "d", coordinate: .init(latitude: 1, longitude: 2), fixTime: 20, receivedAt: 21,
                extras: extras),
            LocationFix(deviceId: "d", coordinate: .init(latitude: 1, longitude: 2), fixTime: 30, receivedAt: 31),
        ])
        let after = try await fixes.fixes(deviceId: "d", after: 10, before: .infinity, limit: 1)
        #expect(after.map(\.fixTime) == [20])
        #expect(after.first?.extras == extras)
        #expect(after.first?.wifiSSID == "Shop")
        #expect(
            try await fixes.fixes(deviceId: "d", after: 0, before: .infinity, limit: 10).map(\.fixTime) == [10, 20, 30])
        #expect(try await fixes.fixes(deviceId: "d", after: 0, before: 30, limit: 10).map(\.fixTime) == [10, 20])
    }
}
