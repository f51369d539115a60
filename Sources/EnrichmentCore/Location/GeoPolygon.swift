import Foundation

/// A polygon on the map: an open ring of vertices (the last joins the first) whose edges run straight in latitude
/// and longitude, not along great circles, as a polygon drawn on a web map means at city scale. `zoi` audiences
/// and polygon regions share it, and its one inside rule: even-odd (ray casting), written in docs/AUDIENCES.md and
/// docs/LOCATION-RULES.md §4.5.
public struct GeoPolygon: Sendable, Hashable {
    public let vertices: [Coordinate]
    /// The box around the vertices, in degrees.
    public let south: Double
    public let north: Double
    public let west: Double
    public let east: Double

    /// A ring taken as given: `GeoPolygon.flaw(of:maximumVertices:)` says what is wrong with one, if anything.
    public init(unchecked vertices: [Coordinate]) {
        self.vertices = vertices
        let latitudes = vertices.map(\.latitude)
        let longitudes = vertices.map(\.longitude)
        south = latitudes.min() ?? 0
        north = latitudes.max() ?? 0
        west = longitudes.min() ?? 0
        east = longitudes.max() ?? 0
    }

    /// The even-odd rule: a ray from `point` towards the east crosses the ring an odd number of times. A vertex
    /// counts for the edge above it only (half-open in latitude), so a ray through a vertex is counted once; a
    /// point exactly on an edge may fall either side.
    public static func evenOdd(_ vertices: [Coordinate], contains point: Coordinate) -> Bool {
        var inside = false
        var j = vertices.count - 1
        for i in vertices.indices {
            let a = vertices[i]
            let b = vertices[j]
            if (a.latitude > point.latitude) != (b.latitude > point.latitude) {
                let crossing =
                    (b.longitude - a.longitude) * (point.latitude - a.latitude) / (b.latitude - a.latitude)
                    + a.longitude
                if point.longitude < crossing { inside.toggle() }
            }
            j = i
        }
        return inside
    }

    /// Whether `point` lies inside (`evenOdd`); a point outside the box is outside without looking at the edges.
    public func contains(_ point: Coordinate) -> Bool {
        guard point.latitude >= south, point.latitude <= north, point.longitude >= west, point.longitude <= east
        else { return false }
        return Self.evenOdd(vertices, contains: point)
    }

    /// The middle of the box: what a polygon region shows as its `latitude` and `longitude`.
    public var centre: Coordinate { Coordinate(latitude: (south + north) / 2, longitude: (west + east) / 2) }

    /// Metres from `centre` to the farthest point of the ring (each vertex, and four points along each edge, since an
    /// edge straight in degrees is not straight on the sphere): a circle that holds the polygon.
    public var reach: Double {
        let centre = centre
        var farthest = 0.0
        var j = vertices.count - 1
        for i in vertices.indices {
            let a = vertices[j]
            let b = vertices[i]
            for step in 0..<4 {
                let t = Double(step) / 4
                let point = Coordinate(
                    latitude: a.latitude + (b.latitude - a.latitude) * t,
                    longitude: a.longitude + (b.longitude - a.longitude) * t)
                farthest = max(farthest, centre.distance(to: point))
            }
            j = i
        }
        return farthest
    }

    /// Metres from `point` to the nearest edge, measured on the plane tangent at `point` (x east, y north, a degree
    /// of longitude shortened by the cosine of its latitude). Within the few hundred metres an accuracy spans this
    /// is the great-circle distance to well under a metre.
    public func distanceToEdges(from point: Coordinate) -> Double {
        let metresPerDegree = Coordinate.earthRadius * .pi / 180
        let xScale = metresPerDegree * cos(point.latitude * .pi / 180)
        func projected(_ c: Coordinate) -> (x: Double, y: Double) {
            (remainder(c.longitude - point.longitude, 360) * xScale, (c.latitude - point.latitude) * metresPerDegree)
        }
        guard let last = vertices.last else { return .infinity }
        var nearest = Double.infinity
        var previous = projected(last)
        for vertex in vertices {
            let current = projected(vertex)
            let dx = current.x - previous.x
            let dy = current.y - previous.y
            let length = dx * dx + dy * dy
            // The foot of the perpendicular from the origin (the point), kept on the segment.
            let t = length > 0 ? min(1, max(0, -(previous.x * dx + previous.y * dy) / length)) : 0
            let x = previous.x + t * dx
            let y = previous.y + t * dy
            nearest = min(nearest, (x * x + y * y).squareRoot())
            previous = current
        }
        return nearest
    }
}
