public import Essentials
import Foundation

/// Who a push goes to, described instead of listed (issue 30): devices near a point or in a region, combined with
/// `all`, `any` and `not`. Resolved within one app against each device's last fix.
public indirect enum Audience: Sendable, Equatable {
    /// Devices whose last fix lies within `radius` metres of `center`, no older than `maxFixAge` seconds and no
    /// coarser than `maxAccuracy` metres (an old or coarse fix is not "near").
    case near(center: Coordinate, radius: Double, maxFixAge: Double, maxAccuracy: Double)
    /// Devices in a custom region by its rule: by its circle or polygon (against the last fix, with `near`'s
    /// default age and accuracy), by its Wi-Fi network (the region state the service keeps from the fixes, which
    /// report the network), or either.
    case region(storedId: String, area: AudienceArea, rule: RegionRule)
    /// Devices carrying every one of these tags (set at registration).
    case tags([String])
    /// Devices with a zone of interest of `period` whose centre lies in `area`.
    case zoi(period: ZonePeriod, area: AudienceArea)
    /// Devices with a visit within `radius` metres of one of `pois` (positions) that overlaps `window`.
    case visited(pois: [Coordinate], radius: Double, window: VisitWindow)
    /// Devices in every one of the parts (`not` parts are taken away); with no part that is not a `not`, every
    /// device of the app with an active registration (`{"all": []}` is everyone).
    case all([Audience])
    /// Devices in any of the parts.
    case any([Audience])
    /// Devices not in the part: only inside `all`, which says what it is taken from.
    case not(Audience)

    /// Default maximum fix age (seconds) and accuracy (metres) of `near`.
    public static let defaultMaxFixAge = 3_600.0
    public static let defaultMaxAccuracy = 500.0
    /// Largest `near` radius, metres.
    public static let maximumRadius = 100_000.0
    /// Deepest nesting of all / any / not.
    public static let maximumDepth = 8
    /// Most POIs a `visited` may name through types, tags or a query.
    public static let maximumVisitedPOIs = 50_000
    /// Most vertices of a polygon.
    public static let maximumVertices = 1_000
    /// Default and largest distance (metres) between a visit and its POI.
    public static let defaultVisitRadius = 100.0
    public static let maximumVisitRadius = 1_000.0
    /// Default look-back of `visited` (7 days) and the longest (366 days), seconds.
    public static let defaultVisitWindow = 604_800.0
    public static let maximumVisitWindow = 31_622_400.0

    /// How a region decides who is in it (its policy).
    public enum RegionRule: String, Sendable, Equatable {
        /// Its circle or polygon, against the last fix.
        case circle
        /// The Wi-Fi network a fix reports: the region state kept from the fixes.
        case wifi
        /// Either of the two.
        case either
    }

    /// A custom region as an audience reads it.
    public struct RegionTarget: Sendable, Equatable {
        /// The id the stores keep (the app's namespace, `custom_` prefix).
        public var storedId: String
        /// Its circle, or its polygon.
        public var area: AudienceArea
        public var rule: RegionRule

        public init(storedId: String, area: AudienceArea, rule: RegionRule) {
            self.storedId = storedId
            self.area = area
            self.rule = rule
        }
    }

    /// Which zones of interest a `zoi` audience looks at.
    public enum ZonePeriod: String, Sendable, Equatable, CaseIterable {
        case home, work, other, any

        /// Whether a ZOI of the SDK's `period` label is one of these.
        public func holds(_ period: String?) -> Bool {
            switch self {
            case .any: true
            case .home: period == "HOME_PERIOD"
            case .work: period == "WORK_PERIOD"
            case .other: period != "HOME_PERIOD" && period != "WORK_PERIOD"
            }
        }
    }

    /// When the visits of a `visited` audience happened.
    public enum VisitWindow: Sendable, Equatable {
        /// The last `seconds` before the audience is resolved.
        case last(Double)
        /// Between two instants (epoch seconds).
        case between(Double, Double)

        /// The window's bounds when resolved at `now`.
        public func bounds(now: Double) -> (from: Double, to: Double) {
            switch self {
            case .last(let seconds): (now - seconds, now)
            case .between(let from, let to): (from, to)
            }
        }
    }

    /// A problem with an audience document: the path of the member at fault and what is allowed.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var path: String
        public var message: String
        public var description: String { "\(path): \(message)" }
    }

    /// What a `near` or `in_region` needs resolved from elsewhere: a POI's position, a region's circle or polygon.
    public protocol Places: Sendable {
        func poiPosition(_ id: String) async throws -> Coordinate?
        /// A custom region of the request's app (nil: no such region).
        func region(_ id: String) async throws -> RegionTarget?
        /// The positions of every POI passing `filter`, or nil when more than `limit` pass.
        func poiPositions(matching filter: PlaceFilter, limit: Int) async throws -> [Coordinate]?
    }

    static let kinds = ["near", "in_region", "all", "any", "not", "zoi", "visited", "tags"]

    /// Reads an audience document, resolving POI ids and region ids through `places`.
    public static func parse(_ value: JSONValue, places: any Places, path: String = "audience", depth: Int = 0)
        async throws -> Audience
    {
        guard depth < maximumDepth else {
            throw Problem(path: path, message: "nests deeper than \(maximumDepth) levels")
        }
        guard case .object(let members) = value, members.count == 1, let only = members.first else {
            throw Problem(
                path: path,
                message: "must be an object with exactly one of \(kinds.joined(separator: ", ")), e.g. "
                    + #"{"near": {"latitude": 48.85, "longitude": 2.29, "radius_m": 500}}"#)
        }
        let (kind, body) = (only.key, only.value)
        let here = "\(path).\(kind)"
        switch kind {
        case "near":
            return try await near(body, places: places, path: here)
        case "in_region":
            guard let id = body.stringValue, !id.isEmpty else {
                throw Problem(path: here, message: "must be a custom region's id (GET /v1/regions lists them)")
            }
            guard let region = try await places.region(id) else {
                throw Problem(path: here, message: "no region '\(id)' (GET /v1/regions lists them)")
            }
            return .region(storedId: region.storedId, area: region.area, rule: region.rule)
        case "all", "any":
            // `{"all": []}` is every device of the app; an `all` of only `not` parts, everyone but them.
            guard case .array(let items) = body, kind == "all" || !items.isEmpty, items.count <= 32 else {
                throw Problem(
                    path: here,
                    message: kind == "all"
                        ? "must be an array of up to 32 audiences ([] is every device of the app)"
                        : "must be an array of 1 to 32 audiences")
            }
            var parts: [Audience] = []
            for (index, item) in items.enumerated() {
                parts.append(try await parse(item, places: places, path: "\(here)[\(index)]", depth: depth + 1))
            }
            if kind == "all" { return .all(parts) }
            if let index = parts.firstIndex(where: { if case .not = $0 { true } else { false } }) {
                throw Problem(
                    path: "\(here)[\(index)].not",
                    message: "'not' takes devices away, so it belongs in 'all', not in 'any'")
            }
            return .any(parts)
        case "not":
            guard depth > 0, path.hasSuffix("]") else {
                throw Problem(
                    path: here,
                    message: "'not' takes devices away from the other parts of an 'all': "
                        + #"{"all": [{"near": ...}, {"not": {"near": ...}}]}"#)
            }
            return .not(try await parse(body, places: places, path: here, depth: depth + 1))
        case "tags":
            guard case .array(let items) = body, (1...16).contains(items.count) else {
                throw Problem(path: here, message: "must be an array of 1 to 16 tags, e.g. [\"plan:pro\", \"lang:fr\"]")
            }
            var tags: [String] = []
            for (index, item) in items.enumerated() {
                guard let tag = item.stringValue, DeviceTags.isValid(tag) else {
                    throw Problem(path: "\(here)[\(index)]", message: DeviceTags.rule)
                }
                tags.append(tag)
            }
            return .tags(tags)
        case "zoi":
            return try zoi(body, path: here)
        case "visited":
            return try await visited(body, places: places, path: here)
        default:
            throw Problem(path: here, message: "unknown audience kind (allowed: \(kinds.joined(separator: ", ")))")
        }
    }

    static func near(_ body: JSONValue, places: any Places, path: String) async throws -> Audience {
        let members = try Members(
            body, path: path,
            allowed: ["latitude", "longitude", "poi_id", "radius_m", "max_fix_age_s", "max_accuracy_m"],
            example: "{latitude, longitude, radius_m} or {poi_id, radius_m}")
        let center: Coordinate
        if let poi = members["poi_id"] {
            guard members["latitude"] == nil, members["longitude"] == nil else {
                throw Problem(path: path, message: "give poi_id or latitude and longitude, not both")
            }
            guard let id = poi.stringValue, !id.isEmpty else {
                throw Problem(path: "\(path).poi_id", message: "must be a POI's store id")
            }
            guard let position = try await places.poiPosition(id) else {
                throw Problem(path: "\(path).poi_id", message: "no POI '\(id)' (GET /v1/pois/{id})")
            }
            center = position
        } else {
            guard let latitude = try members.number("latitude", in: -90...90),
                let longitude = try members.number("longitude", in: -180...180)
            else {
                throw Problem(path: path, message: "needs latitude and longitude (or poi_id)")
            }
            center = Coordinate(latitude: latitude, longitude: longitude)
        }
        guard let radius = try members.number("radius_m", in: 1...maximumRadius) else {
            throw Problem(path: "\(path).radius_m", message: "is required: metres from 1 to \(Int(maximumRadius))")
        }
        return .near(
            center: center, radius: radius,
            maxFixAge: try members.number("max_fix_age_s", in: 1...31_536_000) ?? defaultMaxFixAge,
            maxAccuracy: try members.number("max_accuracy_m", in: 1...100_000) ?? defaultMaxAccuracy)
    }
}

/// Tags a device carries (set at registration): `plan:pro`, `lang:fr`, `topic:sports`.
public enum DeviceTags {
    public static let maximumPerDevice = 32
    public static let rule = "a tag is 1 to 64 letters, digits and - _ . : (e.g. \"plan:pro\")"

    public static func isValid(_ tag: String) -> Bool {
        (1...64).contains(tag.utf8.count)
            && tag.unicodeScalars.allSatisfy {
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.:".unicodeScalars.contains($0))
            }
    }
}

/// Where the devices carrying a tag are found (the token store).
public protocol DeviceTagSource: Sendable {
    /// The stored keys of every device carrying `tag`, in every app.
    func devices(taggedWith tag: String) async throws -> [String]
    /// The stored keys of every device carrying all of `tags` (1 or more), in every app: the first tag's devices
    /// that carry the others, found by the store (no list of the others is read).
    func devices(taggedWithAll tags: [String]) async throws -> [String]
    /// The stored keys of every device of `app` (`AppNamespace`) with an active registration: everyone a push can
    /// reach (an `all` with no part, or with only `not` parts).
    func devices(inApp app: String) async throws -> [String]
    /// `devices(inApp:)` a page at a time: the devices of up to `limit` registrations after the key `after` (nil:
    /// from the first), in the store's order of keys (the order `after` is compared in), each once. A page with
    /// fewer devices than `limit` is not the last (a device with several registrations is one); an empty one is.
    func devices(inApp app: String, after: String?, limit: Int) async throws -> [String]
}
