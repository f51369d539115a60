import Foundation

/// A brute-force point-in-polygon oracle and the polygons the region tests use, written without the service's
/// geometry: plain (latitude, longitude) pairs and the winding number (not the service's ray casting), so a slip in
/// either shows up as a disagreement.
public enum PolygonOracle {
    public typealias Point = (latitude: Double, longitude: Double)

    /// A convex hexagon west of Paris's centre.
    public static let convex: [Point] = [
        (48.846, 2.296), (48.846, 2.304), (48.850, 2.308), (48.854, 2.304), (48.854, 2.296), (48.850, 2.292),
    ]

    /// A concave five-pointed star (outer radius 0.005°, inner 0.002°) around (48.850, 2.330).
    public static let star: [Point] = (0..<10).map { index in
        let radius = index % 2 == 0 ? 0.005 : 0.002
        let angle = Double(index) * Double.pi / 5 + Double.pi / 2
        return (48.850 + radius * sin(angle), 2.330 + radius * cos(angle))
    }

    /// A rectangle with a notch cut into its north side (a U), around (48.850, 2.360): the notch is inside the box
    /// and the circle around the polygon, and outside the polygon.
    public static let notched: [Point] = [
        (48.846, 2.354), (48.846, 2.366), (48.854, 2.366), (48.854, 2.362), (48.849, 2.362), (48.849, 2.358),
        (48.854, 2.358), (48.854, 2.354),
    ]

    /// A point inside the notch of `notched` (outside the polygon).
    public static let inNotch: Point = (48.852, 2.360)
    /// A point inside `notched`, in its southern bar.
    public static let inNotchedBar: Point = (48.847, 2.360)

    /// Whether `point` is inside `ring` (open: the last vertex joins the first), by the winding number: how many
    /// times the ring goes around the point, counted edge by edge with the sign of the turn.
    public static func contains(_ ring: [Point], _ point: Point) -> Bool {
        var winding = 0
        for index in ring.indices {
            let a = ring[index]
            let b = ring[(index + 1) % ring.count]
            // > 0 when the point is left of a→b (x = longitude, y = latitude).
            let side =
                (b.longitude - a.longitude) * (point.latitude - a.latitude)
                - (point.longitude - a.longitude) * (b.latitude - a.latitude)
            if a.latitude <= point.latitude {
                if b.latitude > point.latitude, side > 0 { winding += 1 }
            } else if b.latitude <= point.latitude, side < 0 {
                winding -= 1
            }
        }
        return winding != 0
    }

    /// Whether `point` is within `degrees` of an edge of `ring`, measured in plain degrees: near enough that two
    /// correct rules may disagree on it in floating point, so the tests draw another point.
    public static func nearEdge(_ ring: [Point], _ point: Point, degrees: Double = 1e-7) -> Bool {
        for index in ring.indices {
            let a = ring[index]
            let b = ring[(index + 1) % ring.count]
            let dx = b.longitude - a.longitude
            let dy = b.latitude - a.latitude
            let t = max(
                0,
                min(
                    1, ((point.longitude - a.longitude) * dx + (point.latitude - a.latitude) * dy) / (dx * dx + dy * dy)
                ))
            let x = a.longitude + t * dx - point.longitude
            let y = a.latitude + t * dy - point.latitude
            if (x * x + y * y).squareRoot() < degrees { return true }
        }
        return false
    }

    /// The box around `ring`, widened by `margin` of its size on each side.
    public static func box(_ ring: [Point], margin: Double) -> (
        south: Double, north: Double, west: Double, east: Double
    ) {
        let latitudes = ring.map(\.latitude)
        let longitudes = ring.map(\.longitude)
        let (south, north) = (latitudes.min()!, latitudes.max()!)
        let (west, east) = (longitudes.min()!, longitudes.max()!)
        let height = (north - south) * margin
        let width = (east - west) * margin
        return (south - height, north + height, west - width, east + width)
    }

    /// A random point of `ring`'s widened box that is not near an edge.
    public static func point(
        around ring: [Point], margin: Double = 0.3, using generator: inout some RandomNumberGenerator
    )
        -> Point
    {
        let box = box(ring, margin: margin)
        while true {
            let point = (
                latitude: Double.random(in: box.south...box.north, using: &generator),
                longitude: Double.random(in: box.west...box.east, using: &generator)
            )
            if !nearEdge(ring, point) { return point }
        }
    }

    /// The ring as the `polygon` member of a request: `[{"latitude": …, "longitude": …}, …]`.
    public static func json(_ ring: [Point]) -> String {
        "[" + ring.map { #"{"latitude":\#($0.latitude),"longitude":\#($0.longitude)}"# }.joined(separator: ",") + "]"
    }
}
