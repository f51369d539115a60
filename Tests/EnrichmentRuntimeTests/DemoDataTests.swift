import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore
import Testing

/// The demo's visits (`DemoData`) give the zones the docs' examples rely on whatever day the demo starts: its visits
/// fall on whole UTC days before the start, and the classifier reads week numbers, which change with the date.
@Suite("Demo data: zones of interest on any start day")
struct DemoDataTests {
    static let centre = (latitude: 48.8566, longitude: 2.3522)

    static func metres(_ zone: ZoneOfInterest, _ latitude: Double, _ longitude: Double) -> Double {
        let dLat = (zone.latitude - latitude) * .pi / 180
        let dLon = (zone.longitude - longitude) * .pi / 180
        let h =
            sin(dLat / 2) * sin(dLat / 2)
            + cos(latitude * .pi / 180) * cos(zone.latitude * .pi / 180) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * 6_371_008.8 * asin(min(1, sqrt(h)))
    }

    /// docs/AUDIENCES.md's work-zone polygon (a rectangle).
    static func inWorkPolygon(_ zone: ZoneOfInterest) -> Bool {
        (48.855...48.865).contains(zone.latitude) && (2.33...2.345).contains(zone.longitude)
    }

    /// Each demo device's zones after its visits, as the service's intake makes them, for a demo started at `now`.
    static func zones(now: Double) throws -> [String: [ZoneOfInterest]] {
        let intake = VisitIntake(settings: ServiceConfiguration().location)
        var zones: [String: [ZoneOfInterest]] = [:]
        for request in DemoData.requests(now: now) where request.path.hasSuffix("/visits") {
            let device = request.path.split(separator: "/")[2]
            let items = try VisitIntake.parse(try #require(request.body))
            let (change, outcome) = intake.run(items, deviceId: String(device), state: DeviceVisits(), now: now)
            #expect(outcome.rejected.isEmpty, "\(device): \(outcome.rejected.map(\.message))")
            zones[String(device)] = change.zois
        }
        return zones
    }

    @Test("on any weekday and across New Year, d1 alone has a home zone near the centre and a work zone in the polygon")
    func homeAndWorkEveryDay() throws {
        // Two weeks from 2026-06-01 12:00 UTC (each weekday twice), then each day from 2026-12-10 to 2027-02-01: the
        // visits' three weeks then straddle the turn of the year, where week numbers start again.
        let june = 1_780_315_200.0
        let december = 1_796_904_000.0
        let starts = (0..<14).map { june + Double($0) * 86_400 } + (0..<54).map { december + Double($0) * 86_400 }
        var misses: [String] = []
        for now in starts {
            let zones = try Self.zones(now: now)
            #expect(Set(zones.keys) == ["d1", "d2", "d3"])
            for (device, list) in zones {
                let home = list.contains {
                    $0.period == "HOME_PERIOD" && Self.metres($0, Self.centre.latitude, Self.centre.longitude) <= 2_000
                }
                let work = list.contains { $0.period == "WORK_PERIOD" && Self.inWorkPolygon($0) }
                if home != (device == "d1") || work != (device == "d1") {
                    misses.append("\(device) on \(Date(timeIntervalSince1970: now)): home \(home), work \(work)")
                }
            }
        }
        #expect(misses.isEmpty, "\(misses.prefix(5))")
    }

    @Test("visits lie within the 30 days the examples read and end before the start day; d1's coffee is this week")
    func visitWindow() throws {
        let now = 1_780_315_200.0
        let visits = DemoData.requests(now: now).filter { $0.path.hasSuffix("/visits") }
        #expect(visits.count == 3)
        for request in visits {
            guard case .array(let items)? = request.body?["visits"] else {
                Issue.record("no visits in \(request.path)")
                continue
            }
            #expect(items.count == request.expectedAccepted)
            for item in items {
                let arrival = try #require(item["arrival"]?.lenientDouble)
                let departure = try #require(item["departure"]?.lenientDouble)
                #expect(arrival >= now - 23 * 86_400 && departure <= now - 86_400 && arrival < departure)
            }
        }
        let d1 = try #require(visits.first { $0.path == "/v1/devices/d1/visits" }?.body?["visits"])
        guard case .array(let items) = d1 else { return }
        // Café de Flore (the sample POIs' Paris cafe), within the last 7 days.
        let coffee = items.filter {
            abs(($0["latitude"]?.lenientDouble ?? 0) - 48.8542) < 0.001
                && ($0["arrival"]?.lenientDouble ?? 0) > now - 7 * 86_400
        }
        #expect(coffee.count == 1)
    }

    @Test("a second seeding at another time makes the same requests but for the times")
    func sameRequests() {
        let first = DemoData.requests(now: 1_780_315_200)
        let later = DemoData.requests(now: 1_780_315_200 + 3 * 86_400 + 600)
        #expect(first.map { "\($0.method) \($0.path)" } == later.map { "\($0.method) \($0.path)" })
        // Every device is deleted before it is seeded: seeding again replaces, never adds.
        for id in DemoData.deviceIDs {
            let paths = first.map(\.path)
            let deleted = paths.firstIndex(of: "/v1/devices/\(id)")
            let reported = paths.firstIndex(of: "/v1/devices/\(id)/locations")
            #expect(deleted != nil && reported != nil && deleted! < reported!, "\(id)")
        }
    }
}
