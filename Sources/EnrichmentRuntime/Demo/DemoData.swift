public import Essentials

/// The demo of `enrichment-server demo`: seven devices (`d1` to `d7`) with fixes, tags, time zones and three weeks
/// of visits, and a custom region `depot`, as the API requests that make them. The README's and docs/AUDIENCES.md's
/// audience examples answer what they show against this data and the bundled sample POIs.
///
/// Who is where (the Eiffel Tower POI is at 48.85837, 2.29448; the city centre the examples use is 48.8566, 2.3522):
/// - `d1` (`plan:free`, `lang:fr`): a fix 260 m from the tower, 120 m coarse; lives 100 m from the centre, works in
///   the Palais-Royal area (270 m from the Louvre POI), had a coffee at the Café de Flore four days ago.
/// - `d2` (`plan:pro`, `lang:fr`): a precise fix 860 m from the tower; lives in Boulogne, works in Javel, spent an
///   afternoon at the Louvre ten days ago and an evening at the Café de Flore two weeks ago.
/// - `d3` (`lang:fr`): at the tower, but its fix is two hours old; lives in Vincennes, works by the Hôtel de Ville.
/// - `d4` (`plan:pro`, `lang:de`) in London, `d5` (`plan:free`, `lang:fr`) in Montpellier, `d6` (`plan:pro`,
///   `lang:en`) in New York: fixes only.
/// - `d7` (`plan:pro`, `lang:en`): a fresh, 10 m fix 160 m from the tower.
/// - `depot`: a 1,000 m circle around the Champ de Mars, which holds `d1`, `d2` and `d7` (not `d3`: its fix is
///   older than an hour).
///
/// Visits fall on whole UTC days (nights at home 00:00-07:00 and 21:00-24:00, days at work 09:00-17:00: hours the
/// zones-of-interest classifier reads as home and work), the 21 days that end two days before today; every seeding
/// first deletes each demo device, so seeding again replaces its data rather than adding to it.
public enum DemoData {
    /// One request of the seeding.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var body: JSONValue?
        /// What the answer's `accepted` must count (fixes, visits); nil: any 2xx answer will do.
        public var expectedAccepted: Int?
    }

    struct Place {
        var latitude: Double
        var longitude: Double
    }

    /// A visit away from home and work: on `day` (0 to 20), from `hour` for `hours`.
    struct Outing {
        var day: Int
        var hour: Double
        var hours: Double
        var place: Place
    }

    struct Device {
        var id: String
        var tags: [String]
        var timeZone: String
        var fix: Place
        var accuracy: Double
        /// How old the fix is when it is reported, seconds.
        var fixAge: Double
        var home: Place?
        var work: Place?
        var outings: [Outing] = []
    }

    /// The custom region the examples name.
    public static let regionID = "depot"
    static let depot = (centre: Place(latitude: 48.8556, longitude: 2.2986), radius: 1_000.0)
    /// The bundle id the demo tokens are registered for.
    public static let topic = "com.example.demo"
    /// How often a running demo reports its devices' fixes again, seconds: the freshest fix stays under the 600 s
    /// the first example asks for, and the stale one stays over an hour old.
    public static let refreshInterval = 300.0
    static let day = 86_400.0
    static let cafeDeFlore = Place(latitude: 48.85420, longitude: 2.33262)

    static let devices: [Device] = [
        Device(
            id: "d1", tags: ["plan:free", "lang:fr"], timeZone: "Europe/Paris",
            fix: Place(latitude: 48.8600, longitude: 2.2970), accuracy: 120, fixAge: 120,
            home: Place(latitude: 48.8570, longitude: 2.3530), work: Place(latitude: 48.8625, longitude: 2.3400),
            outings: [Outing(day: 18, hour: 17.5, hours: 1, place: cafeDeFlore)]),
        Device(
            id: "d2", tags: ["plan:pro", "lang:fr"], timeZone: "Europe/Paris",
            fix: Place(latitude: 48.8530, longitude: 2.3030), accuracy: 15, fixAge: 300,
            home: Place(latitude: 48.8397, longitude: 2.2400), work: Place(latitude: 48.8450, longitude: 2.2780),
            outings: [
                Outing(day: 8, hour: 18.5, hours: 1, place: cafeDeFlore),
                Outing(day: 12, hour: 13, hours: 2.5, place: Place(latitude: 48.8608, longitude: 2.3372)),
            ]),
        Device(
            id: "d3", tags: ["lang:fr"], timeZone: "Europe/Paris",
            fix: Place(latitude: 48.8582, longitude: 2.2946), accuracy: 8, fixAge: 7_200,
            home: Place(latitude: 48.8474, longitude: 2.4390), work: Place(latitude: 48.8575, longitude: 2.3500)),
        Device(
            id: "d4", tags: ["plan:pro", "lang:de"], timeZone: "Europe/London",
            fix: Place(latitude: 51.5190, longitude: -0.1270), accuracy: 20, fixAge: 240),
        Device(
            id: "d5", tags: ["plan:free", "lang:fr"], timeZone: "Europe/Paris",
            fix: Place(latitude: 43.6086, longitude: 3.8797), accuracy: 25, fixAge: 240),
        Device(
            id: "d6", tags: ["plan:pro", "lang:en"], timeZone: "America/New_York",
            fix: Place(latitude: 40.7527, longitude: -73.9772), accuracy: 30, fixAge: 240),
        Device(
            id: "d7", tags: ["plan:pro", "lang:en"], timeZone: "Europe/London",
            fix: Place(latitude: 48.8570, longitude: 2.2950), accuracy: 10, fixAge: 60),
    ]

    /// The demo devices' ids.
    public static var deviceIDs: [String] { devices.map(\.id) }

    /// Every request that seeds the demo at `now` (epoch seconds): the region, then per device its deletion, its
    /// token with tags and zone, its visits and its fix.
    public static func requests(now: Double) -> [Request] {
        var requests = [
            Request(
                method: "POST", path: "/v1/regions",
                body: .object([
                    "id": .string(regionID), "latitude": .double(depot.centre.latitude),
                    "longitude": .double(depot.centre.longitude), "radius": .double(depot.radius),
                ]))
        ]
        for device in devices {
            requests.append(Request(method: "DELETE", path: "/v1/devices/\(device.id)"))
            requests.append(
                Request(
                    method: "PUT", path: "/v1/devices/\(device.id)/apns-tokens/\(token(device.id))",
                    body: .object([
                        "topic": .string(topic), "environment": .string("sandbox"),
                        "time_zone": .string(device.timeZone), "tags": .array(device.tags.map(JSONValue.string)),
                    ])))
            let visits = visits(of: device, now: now)
            if !visits.isEmpty {
                requests.append(
                    Request(
                        method: "POST", path: "/v1/devices/\(device.id)/visits",
                        body: .object(["visits": .array(visits)]), expectedAccepted: visits.count))
            }
            requests.append(fixReport(device, now: now))
        }
        return requests
    }

    /// Each device reports its fix again, as old as at the seeding: what keeps a running demo's examples true.
    public static func fixRequests(now: Double) -> [Request] { devices.map { fixReport($0, now: now) } }

    /// A demo token: the device id repeated to 64 hex digits (`d1d1…`), recognisable and never a real phone's.
    static func token(_ id: String) -> String { String(repeating: id, count: 64 / id.count) }

    static func fixReport(_ device: Device, now: Double) -> Request {
        let fix: JSONValue = .object([
            "latitude": .double(device.fix.latitude), "longitude": .double(device.fix.longitude),
            "utc_timestamp": .int(Int64(now - device.fixAge)), "horizontal_accuracy": .double(device.accuracy),
        ])
        return Request(
            method: "POST", path: "/v1/devices/\(device.id)/locations",
            body: .object(["locations": .array([fix])]), expectedAccepted: 1)
    }

    /// The device's visits over the 21 UTC days that end two days before `now`'s: home at night, work by day (not
    /// on a day an outing falls in working hours), and its outings.
    static func visits(of device: Device, now: Double) -> [JSONValue] {
        guard let home = device.home, let work = device.work else { return [] }
        let start = (now / day).rounded(.down) * day - 22 * day
        var visits: [JSONValue] = []
        func visit(_ place: Place, from: Double, to: Double) {
            visits.append(
                .object([
                    "arrival": .int(Int64(from)), "departure": .int(Int64(to)),
                    "latitude": .double(place.latitude), "longitude": .double(place.longitude),
                    "horizontal_accuracy": .double(10),
                ]))
        }
        for index in 0..<21 {
            let midnight = start + Double(index) * day
            let outings = device.outings.filter { $0.day == index }
            visit(home, from: midnight, to: midnight + 7 * 3600)
            if !outings.contains(where: { $0.hour < 17 && $0.hour + $0.hours > 9 }) {
                visit(work, from: midnight + 9 * 3600, to: midnight + 17 * 3600)
            }
            for outing in outings {
                let arrival = midnight + outing.hour * 3600
                visit(outing.place, from: arrival, to: arrival + outing.hours * 3600)
            }
            visit(home, from: midnight + 21 * 3600, to: midnight + day - 60)
        }
        return visits
    }
}
