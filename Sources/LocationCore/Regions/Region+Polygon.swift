public import EnrichmentCore
public import Essentials

extension Region {
    /// Most vertices of a region's polygon (as for a `zoi` audience's).
    public static let maximumVertices = 1_000

    static let vertexExample = #"{"latitude": 48.86, "longitude": 2.33}"#

    /// Reads `polygon` of a `POST /v1/regions` body: an open ring of `{latitude, longitude}` vertices that makes a
    /// simple polygon (`GeoPolygon.flaw`) no farther than `maximumReach` metres from its centre.
    public static func polygon(from value: JSONValue, maximumReach: Double) throws(RegionProblem) -> GeoPolygon {
        let allowed =
            "an array of 3 to \(maximumVertices) distinct vertices [\(vertexExample), ...], in order around the "
            + "outline, the ring open (the last vertex joins the first by itself)"
        guard case .array(let items) = value else {
            throw RegionProblem(field: "polygon", description: "polygon must be \(allowed)")
        }
        var vertices: [Coordinate] = []
        vertices.reserveCapacity(min(items.count, maximumVertices + 1))
        for (index, item) in items.enumerated() where index <= maximumVertices {
            vertices.append(try vertex(item, path: "polygon[\(index)]"))
        }
        switch GeoPolygon.flaw(of: vertices, maximumVertices: maximumVertices) {
        case nil:
            break
        case .tooFewVertices(let count):
            throw RegionProblem(
                field: "polygon", description: "polygon has \(count) vertices; it must be \(allowed)")
        case .tooManyVertices:
            throw RegionProblem(
                field: "polygon",
                description: "polygon has \(items.count) vertices; at most \(maximumVertices) are allowed")
        case .closedRing:
            let last = vertices.count - 1
            throw RegionProblem(
                field: "polygon[\(last)]",
                description: "polygon[\(last)] repeats polygon[0]: the ring is open (the last vertex joins the first "
                    + "by itself), so leave the closing vertex out")
        case .repeatedVertex(let index, let earlier):
            throw RegionProblem(
                field: "polygon[\(index)]",
                description: "polygon[\(index)] repeats polygon[\(earlier)]: each vertex must be distinct")
        case .crossesAntimeridian:
            throw RegionProblem(
                field: "polygon",
                description: "polygon spans more than 180° of longitude, so it would cross the antimeridian, which a "
                    + "region may not: make it two regions, one on each side of ±180°")
        case .crossingEdges(let first, let second):
            func edge(_ index: Int) -> String {
                "\(index) (polygon[\(index)] to polygon[\((index + 1) % vertices.count)])"
            }
            throw RegionProblem(
                field: "polygon",
                description: "polygon edges \(edge(first)) and \(edge(second)) cross or touch: a polygon may not "
                    + "intersect itself; list the vertices in order around its outline")
        case .noArea:
            throw RegionProblem(
                field: "polygon", description: "polygon's vertices lie on one line: it encloses no area")
        }
        let polygon = GeoPolygon(unchecked: vertices)
        let reach = polygon.reach
        guard reach <= maximumReach else {
            throw RegionProblem(
                field: "polygon",
                description: "polygon reaches \(Int(reach.rounded())) m from its centre; at most "
                    + "\(Int(maximumReach)) m (the largest radius) is allowed: split it into smaller regions")
        }
        return polygon
    }

    /// One `{latitude, longitude}` vertex.
    static func vertex(_ item: JSONValue, path: String) throws(RegionProblem) -> Coordinate {
        guard case .object(let fields) = item else {
            throw RegionProblem(field: path, description: "\(path) must be an object \(vertexExample)")
        }
        if let unknown = fields.keys.sorted().first(where: { $0 != "latitude" && $0 != "longitude" }) {
            throw RegionProblem(
                field: "\(path).\(unknown)",
                description: "\(unknown) is not a vertex field; a vertex is \(vertexExample)")
        }
        func number(_ key: String, in range: ClosedRange<Double>) throws(RegionProblem) -> Double {
            guard let raw = fields[key], raw.stringValue == nil, let value = raw.lenientDouble, value.isFinite else {
                throw RegionProblem(field: "\(path).\(key)", description: "\(path).\(key) must be a number")
            }
            guard range.contains(value) else {
                throw RegionProblem(
                    field: "\(path).\(key)",
                    description:
                        "\(path).\(key) \(value) is outside [\(Int(range.lowerBound)), \(Int(range.upperBound))]")
            }
            return value
        }
        return Coordinate(
            latitude: try number("latitude", in: -90...90), longitude: try number("longitude", in: -180...180))
    }
}
