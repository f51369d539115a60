import EnrichmentCore
import Essentials
import Foundation
import LocationCore
import Testing

/// The rules of docs/LOCATION-RULES.md §1.2 and the classified-zone check of §3.7.
@Suite struct VisitIntakeTests {
    let intake = VisitIntake(settings: LocationSettings(), makeId: { _ in "zoi" })

    func item(_ json: String) throws -> [Result<VisitIntake.Item, VisitIntake.Rejection>] {
        try VisitIntake.parse(try JSONValue.decode(Data(json.utf8)))
    }

    func run(_ json: String, state: DeviceVisits = DeviceVisits()) throws -> (DeviceVisitsChange, VisitIntake.Outcome) {
        intake.run(try item(json), deviceId: "d", state: state, now: 2_000_000_000)
    }

    @Test func theAccuracyFilterIsStrictAt50() throws {
        let (change, outcome) = try run(
            #"{"visits":[{"arrival":1000,"departure":2000,"latitude":1,"longitude":2,"horizontal_accuracy":49.99},"#
                + #"{"arrival":3000,"departure":4000,"latitude":1,"longitude":2,"horizontal_accuracy":50}]}"#)
        #expect(outcome.accepted.count == 1)
        #expect(outcome.rejected.map(\.index) == [1])
        #expect(outcome.rejected.first?.reason == "accuracy_too_low")
        #expect(change.zois.count == 1)
    }

    @Test func distantFutureAndMissingDeparturesAreNotStored() throws {
        let (change, outcome) = try run(
            #"{"visits":[{"arrival":1000,"departure":64092211200,"latitude":1,"longitude":2,"horizontal_accuracy":10},"#
                + #"{"arrival":1000,"latitude":1,"longitude":2,"horizontal_accuracy":10},"#
                + #"{"arrival":1000,"departure":64092211199,"latitude":1,"longitude":2,"horizontal_accuracy":10}]}"#)
        #expect(outcome.rejected.map(\.reason) == ["departure_unknown", "departure_unknown"])
        #expect(outcome.accepted.count == 1)
        #expect(change.newVisits.count == 1)
    }

    @Test func itemRulesNameTheFieldAndKeepOrder() throws {
        let (_, outcome) = try run(
            #"{"visits":[{"arrival":1000,"departure":900,"latitude":1,"longitude":2,"horizontal_accuracy":10},"#
                + #"{"arrival":1000,"departure":2000,"latitude":91,"longitude":2,"horizontal_accuracy":10},"#
                + #"{"arrival":1000,"departure":2000,"latitude":1,"longitude":2,"horizontal_accuracy":0},"#
                + #"{"arrival":"x","departure":2000,"latitude":1,"longitude":2,"horizontal_accuracy":5},"#
                + #"{"id":"a","arrival":1000,"departure":2000,"latitude":1,"longitude":2,"horizontal_accuracy":5},"#
                + #"{"id":"a","arrival":3000,"departure":4000,"latitude":1,"longitude":2,"horizontal_accuracy":5},"#
                + #"{"arrival":-62135596800,"departure":4000,"latitude":1,"longitude":2,"horizontal_accuracy":5},"#
                + #"{"arrival":1,"departure":2,"latitude":1,"longitude":2,"horizontal_accuracy":5,"window":3}]}"#)
        #expect(outcome.accepted.map(\.id) == ["a"])
        #expect(outcome.rejected.map(\.index) == [0, 1, 2, 3, 5, 6, 7])
        #expect(outcome.rejected[0].message.contains("departure"))
        #expect(outcome.rejected[1].message.contains("latitude"))
        #expect(outcome.rejected[2].message.contains("horizontal_accuracy"))
        #expect(outcome.rejected[3].message.contains("arrival"))
        #expect(outcome.rejected[4].reason == "duplicate_id")
        #expect(outcome.rejected[6].message.contains("window"))
    }

    @Test func aVisitNearAClassifiedZoneRecordsAZoneEventEvenWhenItIsAnArrival() throws {
        let home = ZoneOfInterest(
            id: "h", meanX: SphericalMercator.lon2x(2), meanY: SphericalMercator.lat2y(1), inverse: [1, 0, 0, 1],
            det: 1, prior: 1, accumulator: 1, age: 1, visitIds: [], startTime: 0, endTime: 0, duration: 0,
            weeklyDensity: [], period: ZOIPeriod.home, wktPolygon: "")
        var other = home
        other.id = "o"
        other.period = ZOIPeriod.other
        let state = DeviceVisits(visits: [], zois: [home, other])
        // 99.9 m north: inside (strict < 100); 100.1 m: outside.
        let near = 1 + 99.9 / 111_195.08
        let far = 1 + 100.1 / 111_195.08
        let (change, _) = try run(
            #"{"visits":[{"arrival":1000,"latitude":\#(near),"longitude":2,"horizontal_accuracy":10},"#
                + #"{"arrival":1000,"departure":2000,"latitude":\#(near),"longitude":2,"horizontal_accuracy":10},"#
                + #"{"arrival":1000,"departure":2000,"latitude":\#(far),"longitude":2,"horizontal_accuracy":10}]}"#,
            state: state)
        let zoneEvents = change.events.filter { $0.type.hasPrefix("zoi_") }
        #expect(zoneEvents.map(\.type) == ["zoi_enter", "zoi_exit"])
        #expect(zoneEvents.allSatisfy { $0.name.hasPrefix("woos_zoi_classified_") })
        #expect(zoneEvents.first?.fields["period"] == .string("HOME_PERIOD"))
        #expect(change.events.filter { $0.type == "visit" }.count == 2)
    }
}
