import EnrichmentCore
public import Essentials
import Foundation

/// Runs reported visits through the rules of docs/LOCATION-RULES.md §1.2, the classified-ZOI check of §3.7 and the ZOI
/// pipeline of §2, in request order.
public struct VisitIntake: Sendable {
    public var settings: LocationSettings
    public var figmm: FIGMM

    /// `makeId` names new ZOIs after the visit that creates them (`zoi-<visit id>` when nil).
    public init(settings: LocationSettings, makeId: (@Sendable (Visit) -> String)? = nil) {
        self.settings = settings
        self.figmm =
            makeId.map { FIGMM(classificationEnabled: settings.classificationEnabled, makeId: $0) }
            ?? FIGMM(classificationEnabled: settings.classificationEnabled)
    }

    /// One item of a visits request, read but not yet judged.
    public struct Item: Sendable, Equatable {
        public var id: String?
        public var arrival: Double
        public var departure: Double?
        public var latitude: Double
        public var longitude: Double
        public var horizontalAccuracy: Double
        public var source = "reported"

        public init(
            id: String?, arrival: Double, departure: Double?, latitude: Double, longitude: Double,
            horizontalAccuracy: Double, source: String = "reported"
        ) {
            self.id = id
            self.arrival = arrival
            self.departure = departure
            self.latitude = latitude
            self.longitude = longitude
            self.horizontalAccuracy = horizontalAccuracy
            self.source = source
        }
    }

    /// A refused item: its index and why.
    public struct Rejection: Error, Sendable, Equatable, JSONObjectRepresentable {
        public var index: Int
        public var reason: String
        public var message: String

        public func writeJSON(into object: inout JSONObjectWriter) {
            object.field("index", index)
            object.field("reason", reason)
            object.field("message", message)
        }
    }

    /// What a run did.
    public struct Outcome: Sendable, Equatable {
        public var accepted: [Visit] = []
        public var rejected: [Rejection] = []
    }

    /// Reads `{"visits": [...]}`; an item that cannot be read becomes a rejection, the rest stay in order.
    public static func parse(_ document: JSONValue) throws(VisitRequestError) -> [Result<Item, Rejection>] {
        guard case .object = document else { throw .notAnObject(found: document.typeName) }
        guard let list = document["visits"] else { throw .missingVisits }
        guard case .array(let items) = list else { throw .visitsNotArray(found: list.typeName) }
        guard items.count <= 10_000 else { throw .tooMany(items.count) }
        return items.enumerated().map { index, value in parseItem(value, index: index) }
    }

    static func parseItem(_ value: JSONValue, index: Int) -> Result<Item, Rejection> {
        func fail(_ reason: String, _ message: String) -> Result<Item, Rejection> {
            .failure(Rejection(index: index, reason: reason, message: message))
        }
        guard case .object(let fields) = value else {
            return fail("invalid", "visits[\(index)] must be an object, found \(value.typeName)")
        }
        let known: Set<String> = ["id", "arrival", "departure", "latitude", "longitude", "horizontal_accuracy"]
        if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
            return fail(
                "invalid",
                "visits[\(index)].\(unknown) is not a visit field; allowed: arrival, departure, latitude, longitude, horizontal_accuracy, id"
            )
        }
        func number(_ key: String, required: Bool = true) -> Result<Double?, Rejection> {
            guard let raw = fields[key], raw != .null else {
                return required
                    ? .failure(
                        Rejection(index: index, reason: "invalid", message: "visits[\(index)].\(key) is missing"))
                    : .success(nil)
            }
            switch raw {
            case .int(let v): return .success(Double(v))
            case .double(let v) where v.isFinite: return .success(v)
            default:
                return .failure(
                    Rejection(
                        index: index, reason: "invalid",
                        message: "visits[\(index)].\(key) must be a finite number, found \(raw.typeName)"))
            }
        }
        var values: [String: Double] = [:]
        for key in ["arrival", "latitude", "longitude", "horizontal_accuracy"] {
            switch number(key) {
            case .success(let v): values[key] = v
            case .failure(let r): return .failure(r)
            }
        }
        let departure: Double?
        switch number("departure", required: false) {
        case .success(let v): departure = v
        case .failure(let r): return .failure(r)
        }
        var id: String?
        if let raw = fields["id"], raw != .null {
            guard let text = raw.stringValue, !text.isEmpty, text.count <= 128,
                !InputText.hasControlCharacters(text)
            else {
                return fail("invalid", "visits[\(index)].id must be 1-128 characters, without control characters")
            }
            id = text
        }
        return .success(
            Item(
                id: id, arrival: values["arrival"]!, departure: departure, latitude: values["latitude"]!,
                longitude: values["longitude"]!, horizontalAccuracy: values["horizontal_accuracy"]!))
    }

    /// The rules an item must pass besides the departure (§1.2 rules 1, 3, 4, 5), as a rejection.
    func check(_ item: Item, index: Int, isKnown: (String) -> Bool) -> Rejection? {
        func reject(_ reason: String, _ message: String) -> Rejection {
            Rejection(index: index, reason: reason, message: message)
        }
        guard (-90...90).contains(item.latitude) else {
            return reject("invalid", "visits[\(index)].latitude \(item.latitude) is outside [-90, 90]")
        }
        guard (-180...180).contains(item.longitude) else {
            return reject("invalid", "visits[\(index)].longitude \(item.longitude) is outside [-180, 180]")
        }
        guard item.arrival > SDKDates.distantPast else {
            return reject("invalid", "visits[\(index)].arrival must be after 0001-01-01 (epoch seconds)")
        }
        // An arrival is a time in the past; 4001-01-01 and later is the SDK's "not known", never an arrival (and a
        // value beyond Int's range would trap where the visit's id is made from it).
        guard item.arrival < SDKDates.distantFuture else {
            return reject("invalid", "visits[\(index)].arrival must be before 4001-01-01 (epoch seconds)")
        }
        if let departure = item.departure, departure < SDKDates.distantFuture, departure < item.arrival {
            return reject("invalid", "visits[\(index)].departure is before its arrival")
        }
        // The SDK needs > 0 (σ = 0 turns the mixture into NaN); below a micrometre pow(σ, −2) overflows as well.
        guard item.horizontalAccuracy >= Self.minimumAccuracy else {
            return reject(
                "invalid", "visits[\(index)].horizontal_accuracy must be at least \(Self.minimumAccuracy) metres")
        }
        guard item.horizontalAccuracy < settings.visitAccuracyFilter else {
            return reject(
                "accuracy_too_low",
                "visits[\(index)].horizontal_accuracy \(item.horizontalAccuracy) m is not below the \(settings.visitAccuracyFilter) m visit filter"
            )
        }
        if let id = item.id, isKnown(id) {
            return reject("duplicate_id", "visits[\(index)].id '\(id)' is already a visit of this device")
        }
        return nil
    }

    /// The smallest accepted accuracy, metres: the mixture's numbers stay finite above it.
    public static let minimumAccuracy = 0.000001

    /// Runs the items (in order) over a device's stored state; `now` is the recording time.
    public func run(
        _ items: [Result<Item, Rejection>], deviceId: String, state: DeviceVisits, now: Double
    ) -> (DeviceVisitsChange, Outcome) {
        var zois = state.zois
        var byId: [String: Visit] = [:]
        for v in state.visits { byId[v.id] = v }
        var change = DeviceVisitsChange()
        var outcome = Outcome()
        for (index, result) in items.enumerated() {
            let item: Item
            switch result {
            case .failure(let rejection):
                outcome.rejected.append(rejection)
                continue
            case .success(let value): item = value
            }
            if let rejection = check(item, index: index, isKnown: { byId[$0] != nil }) {
                outcome.rejected.append(rejection)
                continue
            }
            let known = item.departure.map { $0 < SDKDates.distantFuture } ?? false
            // §3.7: every visit past the filter, arrival-only ones included, before it is stored.
            change.events += classifiedZOIEvents(item, entering: !known, zois: zois, deviceId: deviceId, now: now)
            guard known, let departure = item.departure else {
                outcome.rejected.append(
                    Rejection(
                        index: index, reason: "departure_unknown",
                        message:
                            "visits[\(index)].departure is missing or 4001-01-01 (an arrival): not stored; checked against home/work zones only"
                    ))
                continue
            }
            let visit = Visit(
                id: item.id
                    ?? "visit-\(AppNamespace.id(of: deviceId))-\(Int(item.arrival))-\(state.visits.count + change.newVisits.count)",
                deviceId: deviceId, arrival: item.arrival, departure: departure, latitude: item.latitude,
                longitude: item.longitude, horizontalAccuracy: item.horizontalAccuracy, recordedAt: now,
                source: item.source)
            byId[visit.id] = visit
            if settings.zoiEnabled {
                let next = figmm.process(visit, zois: zois) { byId[$0] }
                // A mixture that overflowed would be stored as nulls and poison every later visit: refused whole.
                guard next.allSatisfy(\.isFinite) else {
                    byId[visit.id] = nil
                    outcome.rejected.append(
                        Rejection(
                            index: index, reason: "numeric_overflow",
                            message: "visits[\(index)] would make the zones' numbers overflow; not stored"))
                    continue
                }
                zois = next
            }
            change.newVisits.append(visit)
            outcome.accepted.append(visit)
            change.events.append(
                .make(
                    "visit", deviceId: deviceId, date: now,
                    fields: [
                        "visit_id": .string(visit.id), "arrival": .double(visit.arrival),
                        "departure": .double(visit.departure), "latitude": .double(visit.latitude),
                        "longitude": .double(visit.longitude),
                        "horizontal_accuracy": .double(visit.horizontalAccuracy), "source": .string(visit.source),
                    ]))
        }
        change.zois = zois
        return (change, outcome)
    }

    /// §3.7: a ZOI event for each classified ZOI whose centre is strictly within the radius of the visit.
    func classifiedZOIEvents(_ item: Item, entering: Bool, zois: [ZoneOfInterest], deviceId: String, now: Double)
        -> [LocationEvent]
    {
        var events: [LocationEvent] = []
        let point = Coordinate(latitude: item.latitude, longitude: item.longitude)
        for zoi in zois where zoi.isClassified {
            let centre = Coordinate(latitude: zoi.latitude, longitude: zoi.longitude)
            guard point.distance(to: centre) < settings.classifiedZOIRadius else { continue }
            events.append(
                .make(
                    entering ? "zoi_enter" : "zoi_exit", deviceId: deviceId, date: now,
                    fields: [
                        "period": .string(zoi.period ?? ""), "zoi_id": .string(zoi.id),
                        "latitude": .double(centre.latitude), "longitude": .double(centre.longitude),
                        "radius": .double(settings.classifiedZOIRadius),
                    ]))
        }
        return events
    }

    /// The SDK's sample importer path (§1.1 step 6): straight into the pipeline, no rules, no events.
    public func replaySample(_ visits: [Visit], zois start: [ZoneOfInterest] = []) -> [ZoneOfInterest] {
        var zois = start
        var byId: [String: Visit] = [:]
        for visit in visits {
            byId[visit.id] = visit
            zois = figmm.process(visit, zois: zois) { byId[$0] }
        }
        return zois
    }
}

/// Why a whole visits request was refused.
public enum VisitRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    case notAnObject(found: String)
    case missingVisits
    case visitsNotArray(found: String)
    case tooMany(Int)

    public var description: String {
        switch self {
        case .notAnObject(let found): "body must be a JSON object {\"visits\": [...]}, found \(found)"
        case .missingVisits:
            "body.visits is missing; send {\"visits\": [{\"arrival\", \"departure\", \"latitude\", \"longitude\", \"horizontal_accuracy\"}]}"
        case .visitsNotArray(let found): "body.visits must be an array, found \(found)"
        case .tooMany(let count): "body has \(count) visits; at most 10000 per request"
        }
    }
}
