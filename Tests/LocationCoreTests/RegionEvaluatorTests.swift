import EnrichmentCore
import Essentials
import LocationCore
import Testing

/// Enter/exit rules of docs/LOCATION-RULES.md §4.5 and GeofenceKit's Wi-Fi rule.
@Suite struct RegionEvaluatorTests {
    let evaluator = RegionEvaluator(settings: LocationSettings())
    let region = Region(id: "custom_store", latitude: 48, longitude: 2, radius: 100)

    /// A fix `metres` north of the region's centre.
    func at(_ t: Double, metres: Double, accuracy: Double = 0, ssid: String? = nil) -> RegionEvaluator.Observation {
        let lat = 48 + metres / (Coordinate.earthRadius * Double.pi / 180)
        return .init(
            fix: LocationFix(
                deviceId: "d", coordinate: Coordinate(latitude: lat, longitude: 2), fixTime: t,
                horizontalAccuracy: accuracy, receivedAt: t), wifiSSID: ssid)
    }

    func run(_ observations: [RegionEvaluator.Observation], regions: [Region]? = nil, state: inout DeviceRegionState)
        -> [LocationEvent]
    {
        let all = regions ?? [region]
        return evaluator.evaluate(
            observations, deviceId: "d", state: &state, zones: [], custom: { _ in all },
            customById: { id in all.first { $0.id == id } }, pois: nil)
    }

    @Test func insideIsStrictAfterSubtractingAccuracy() {
        var state = DeviceRegionState()
        // 120 m away with 20 m accuracy: 100 is not < 100, outside.
        #expect(run([at(0, metres: 120, accuracy: 20)], state: &state).isEmpty)
        var state2 = DeviceRegionState()
        let events = run([at(0, metres: 120, accuracy: 20.5)], state: &state2)
        #expect(events.map(\.type) == ["region_enter"])
        #expect(events.first?.name == "woos_geofence_entered_event")
        #expect(events.first?.fields["from_position_detection"] == .bool(true))
    }

    @Test func theFirstEventIsNeverAnExit() {
        var state = DeviceRegionState()
        #expect(run([at(0, metres: 500), at(10, metres: 600)], state: &state).isEmpty)
    }

    @Test func changesWithinFiveSecondsAreIgnored() {
        var state = DeviceRegionState()
        let events = run([at(0, metres: 0), at(4.999, metres: 500), at(5, metres: 500)], state: &state)
        #expect(events.map(\.type) == ["region_enter", "region_exit"])
        #expect(events.map(\.date) == [0, 5])
        var state2 = DeviceRegionState()
        let quick = run([at(0, metres: 0), at(4.999, metres: 500)], state: &state2)
        #expect(quick.map(\.type) == ["region_enter"])
    }

    @Test func fixesAreTakenInFixTimeOrderAndOldOnesSkipped() {
        var state = DeviceRegionState()
        let events = run([at(100, metres: 500), at(0, metres: 0)], state: &state)
        #expect(events.map(\.type) == ["region_enter", "region_exit"])
        #expect(state.lastFixTime == 100)
        #expect(run([at(50, metres: 0)], state: &state).isEmpty)
    }

    @Test func wifiPolicies() {
        var wifi = region
        wifi.wifiSSID = "Shop"
        for (policy, expected) in [(Region.Policy.either, 1), (.wifi, 1), (.circle, 0)] {
            wifi.policy = policy
            var state = DeviceRegionState()
            let events = run([at(0, metres: 5000, ssid: "Shop")], regions: [wifi], state: &state)
            #expect(events.count == expected, "policy \(policy)")
        }
        wifi.policy = .wifi
        var state = DeviceRegionState()
        // Policy wifi ignores the circle when a network is named.
        #expect(run([at(0, metres: 0, ssid: "Other")], regions: [wifi], state: &state).isEmpty)
    }

    @Test func poiRegionsAreReplacedAndEnteredOnCreation() {
        let poi = POI(storeId: "s1", name: "Shop", coordinate: Coordinate(latitude: 48, longitude: 2))
        var state = DeviceRegionState()
        let events = evaluator.evaluate(
            [at(0, metres: 50)], deviceId: "d", state: &state, zones: [], custom: { _ in [] },
            customById: { _ in nil }, pois: { _ in [PlaceMatch(poi: poi, distance: 50)] })
        #expect(state.poiRegions.map(\.id) == ["poi_s1_Shop - 100.0 m"])
        #expect(events.map(\.type) == ["region_enter"])
        #expect(events.first?.fields["from_position_detection"] == .bool(false))
        #expect(events.first?.fields["idstore"] == .string("s1"))
    }
}

@Suite struct RegionStatePruningTests {
    @Test func oldExitLogsGoAndBehaveAsNoLog() {
        let region = Region(id: "custom_a", latitude: 48, longitude: 2, radius: 100)
        let evaluator = RegionEvaluator(settings: LocationSettings())
        func at(_ t: Double, _ lat: Double) -> RegionEvaluator.Observation {
            .init(
                fix: LocationFix(
                    deviceId: "d", coordinate: Coordinate(latitude: lat, longitude: 2), fixTime: t,
                    horizontalAccuracy: 0, receivedAt: t))
        }
        var state = DeviceRegionState()
        let events = evaluator.evaluate(
            [at(0, 48), at(10, 49), at(20, 49)], deviceId: "d", state: &state, zones: [], custom: { _ in [region] },
            customById: { _ in region }, pois: nil)
        #expect(events.map(\.type) == ["region_enter", "region_exit"])
        #expect(state.logs.isEmpty)
        // Back inside: a new enter, as after an exit log.
        let again = evaluator.evaluate(
            [at(30, 48)], deviceId: "d", state: &state, zones: [], custom: { _ in [region] },
            customById: { _ in region }, pois: nil)
        #expect(again.map(\.type) == ["region_enter"])
        #expect(state.logs["custom_a"]?.didEnter == true)
    }
}
