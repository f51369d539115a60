public import Essentials
import Foundation

/// `zoi` and `visited`: audiences over what the location pipeline learned of each device (its zones of interest
/// and its visits), not only its last fix.
extension Audience {
    /// The members of an audience's object, read with the path of each for errors.
    struct Members {
        let members: [String: JSONValue]
        let path: String

        init(_ body: JSONValue, path: String, allowed: [String], example: String) throws {
            guard case .object(let members) = body else {
                throw Problem(path: path, message: "must be an object, e.g. \(example)")
            }
            if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw Problem(
                    path: "\(path).\(unknown)", message: "unknown (allowed: \(allowed.joined(separator: ", ")))")
            }
            self.members = members
            self.path = path
        }

        subscript(key: String) -> JSONValue? { members[key] }

        func number(_ key: String, in range: ClosedRange<Double>) throws -> Double? {
            guard let value = members[key] else { return nil }
            guard value.stringValue == nil, let number = value.lenientDouble, range.contains(number) else {
                throw Problem(
                    path: "\(path).\(key)", message: "must be a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }

        func strings(_ key: String, count: ClosedRange<Int>, rule: String) throws -> [String]? {
            guard let value = members[key] else { return nil }
            guard case .array(let items) = value, count.contains(items.count) else {
                throw Problem(
                    path: "\(path).\(key)",
                    message: "must be an array of \(count.lowerBound) to \(count.upperBound) strings (\(rule))")
            }
            return try items.enumerated().map { index, item in
                guard let text = item.stringValue, (1...200).contains(text.utf8.count) else {
                    throw Problem(path: "\(path).\(key)[\(index)]", message: "must be a string of 1 to 200 bytes")
                }
                return text
            }
        }
    }

    static let zoiExample =
        #"{"period": "home", "latitude": 48.85, "longitude": 2.35, "radius_m": 2000}"#

    /// `{"zoi": {"period": "home", "latitude", "longitude", "radius_m"}}` or `{"zoi": {"period", "polygon": [...]}}`.
    static func zoi(_ body: JSONValue, path: String) throws -> Audience {
        let members = try Members(
            body, path: path, allowed: ["period", "latitude", "longitude", "radius_m", "polygon"],
            example: zoiExample)
        var period = ZonePeriod.any
        if let raw = members["period"] {
            let allowed = ZonePeriod.allCases.map(\.rawValue)
            guard let text = raw.stringValue, let known = ZonePeriod(rawValue: text) else {
                throw Problem(path: "\(path).period", message: "must be one of \(allowed.joined(separator: ", "))")
            }
            period = known
        }
        return .zoi(period: period, area: try area(members, example: zoiExample))
    }

    /// A circle (`latitude`, `longitude`, `radius_m`) or a `polygon` of `{latitude, longitude}` vertices.
    static func area(_ members: Members, example: String) throws -> AudienceArea {
        let path = members.path
        if let polygon = members["polygon"] {
            guard members["latitude"] == nil, members["longitude"] == nil, members["radius_m"] == nil else {
                throw Problem(path: path, message: "give a polygon or latitude, longitude and radius_m, not both")
            }
            guard case .array(let items) = polygon, (3...maximumVertices).contains(items.count) else {
                throw Problem(
                    path: "\(path).polygon",
                    message: "must be an array of 3 to \(maximumVertices) vertices "
                        + #"[{"latitude": 48.86, "longitude": 2.33}, ...]"#)
            }
            var vertices: [Coordinate] = []
            for (index, item) in items.enumerated() {
                let vertex = try Members(
                    item, path: "\(path).polygon[\(index)]", allowed: ["latitude", "longitude"],
                    example: #"{"latitude": 48.86, "longitude": 2.33}"#)
                guard let latitude = try vertex.number("latitude", in: -90...90),
                    let longitude = try vertex.number("longitude", in: -180...180)
                else {
                    throw Problem(path: vertex.path, message: "needs latitude and longitude")
                }
                vertices.append(Coordinate(latitude: latitude, longitude: longitude))
            }
            let longitudes = vertices.map(\.longitude)
            let latitudes = vertices.map(\.latitude)
            if let west = longitudes.min(), let east = longitudes.max(), east - west > 180 {
                throw Problem(
                    path: "\(path).polygon",
                    message: "spans more than 180° of longitude: a polygon may not cross the antimeridian "
                        + "(split it in two with 'any')")
            }
            // As large as the largest circle (100 km radius): the box around it is read whole.
            if let south = latitudes.min(), let north = latitudes.max(), let west = longitudes.min(),
                let east = longitudes.max()
            {
                let middle = (south + north) / 2 * .pi / 180
                let height = (north - south) * 111_195
                let width = (east - west) * 111_195 * cos(middle)
                if max(height, width) > 2 * maximumRadius {
                    throw Problem(
                        path: "\(path).polygon",
                        message: "spans more than \(Int(2 * maximumRadius / 1000)) km: split it with 'any', or use "
                            + "a narrower one")
                }
            }
            return .polygon(vertices)
        }
        guard let latitude = try members.number("latitude", in: -90...90),
            let longitude = try members.number("longitude", in: -180...180)
        else {
            throw Problem(path: path, message: "needs latitude, longitude and radius_m, or a polygon, e.g. \(example)")
        }
        guard let radius = try members.number("radius_m", in: 1...maximumRadius) else {
            throw Problem(path: "\(path).radius_m", message: "is required: metres from 1 to \(Int(maximumRadius))")
        }
        return .circle(center: Coordinate(latitude: latitude, longitude: longitude), radius: radius)
    }

    static let visitedExample = #"{"types": ["cafe"], "within_s": 604800}"#

    /// `{"visited": {"poi_id" | "types" / "tags" | "query", "radius_m", "within_s" | "since" / "until"}}`.
    static func visited(_ body: JSONValue, places: any Places, path: String) async throws -> Audience {
        let members = try Members(
            body, path: path,
            allowed: ["poi_id", "types", "tags", "query", "radius_m", "within_s", "since", "until"],
            example: visitedExample)
        let radius = try members.number("radius_m", in: 1...maximumVisitRadius) ?? defaultVisitRadius
        let pois: [Coordinate]
        if let poi = members["poi_id"] {
            guard members["types"] == nil, members["tags"] == nil, members["query"] == nil else {
                throw Problem(path: path, message: "give poi_id, or types / tags / query, not both")
            }
            guard let id = poi.stringValue, !id.isEmpty else {
                throw Problem(path: "\(path).poi_id", message: "must be a POI's store id")
            }
            guard let position = try await places.poiPosition(id) else {
                throw Problem(path: "\(path).poi_id", message: "no POI '\(id)' (GET /v1/pois/{id})")
            }
            pois = [position]
        } else {
            var filters: [PlaceFilter] = []
            for (key, field) in [("types", PlaceFilter.Field.type), ("tags", .tag)] {
                guard let values = try members.strings(key, count: 1...32, rule: "a POI has any of them") else {
                    continue
                }
                let clauses = values.map { PlaceFilter.clause(.init(field: field, value: .string($0))) }
                filters.append(clauses.dropFirst().reduce(clauses[0]) { .or($0, $1) })
            }
            if let query = members["query"] {
                guard let text = query.stringValue, !text.isEmpty else {
                    throw Problem(path: "\(path).query", message: #"must be a POI filter, e.g. "type:\"cafe\"""#)
                }
                do {
                    filters.append(try PlaceFilter.parse(text))
                } catch {
                    throw Problem(path: "\(path).query", message: error.description)
                }
            }
            guard let first = filters.first else {
                throw Problem(
                    path: path, message: "needs poi_id, types, tags or query to say which POIs, e.g. \(visitedExample)")
            }
            let filter = filters.dropFirst().reduce(first) { .and($0, $1) }
            guard let found = try await places.poiPositions(matching: filter, limit: maximumVisitedPOIs) else {
                throw Problem(
                    path: path,
                    message: "names more than \(maximumVisitedPOIs) POIs: narrow its types, tags or query")
            }
            pois = found
        }
        let window: VisitWindow
        if members["since"] != nil || members["until"] != nil {
            guard members["within_s"] == nil else {
                throw Problem(path: path, message: "give within_s, or since (and until), not both")
            }
            guard let since = try members.number("since", in: 0...32_503_680_000) else {
                throw Problem(path: "\(path).since", message: "is required with until: an instant, epoch seconds")
            }
            if members["until"] == nil, since < Date().timeIntervalSince1970 - maximumVisitWindow {
                throw Problem(
                    path: "\(path).since",
                    message: "is more than 366 days ago: give a later since, or until (at most 366 days after it)")
            }
            let until = try members.number("until", in: 0...32_503_680_000)
            if let until, until < since {
                throw Problem(path: "\(path).until", message: "must not come before since")
            }
            if let until, until - since > maximumVisitWindow {
                throw Problem(path: path, message: "since to until spans more than 366 days")
            }
            // No `until`: every visit since then, up to when the audience is resolved.
            window = .between(since, until ?? .infinity)
        } else {
            window = .last(try members.number("within_s", in: 60...maximumVisitWindow) ?? defaultVisitWindow)
        }
        return .visited(pois: pois, radius: radius, window: window)
    }
}
