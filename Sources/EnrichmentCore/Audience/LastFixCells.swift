import Foundation

/// The grid the stores index every device's last fix on, for audiences (`near`): cells of 0.01° of latitude by
/// 0.01° of longitude (about 1.1 km by 1.1 km × cos(latitude)), numbered row by row from the south-west corner,
/// so that one row of a circle's cells is one contiguous range of cell numbers.
public enum LastFixCells {
    /// Cells per degree (a cell's side is 0.01°). The stores compute the same numbers in SQL from
    /// `(latitude + 90) * 100` and `(longitude + 180) * 100`, floored: the same IEEE arithmetic as here.
    public static let perDegree = 100.0
    static let columns: Int64 = 36_000

    /// The cell of a point (the poles and the antimeridian clamp into the last row and column).
    public static func cell(latitude: Double, longitude: Double) -> Int64 {
        row(latitude) * columns + column(longitude)
    }

    static func row(_ latitude: Double) -> Int64 {
        min(17_999, max(0, Int64(((latitude + 90) * perDegree).rounded(.down))))
    }

    static func column(_ longitude: Double) -> Int64 {
        min(columns - 1, max(0, Int64(((longitude + 180) * perDegree).rounded(.down))))
    }

    /// The ranges of cell numbers (inclusive) whose cells may hold a point within `radius` metres of `center`: one
    /// range per row of the circle's bounding box. A circle across the antimeridian is cut at it.
    public static func ranges(center: Coordinate, radius: Double) -> [ClosedRange<Int64>] {
        // Degrees on the sphere every distance is measured on, with a margin: a cell too many costs a few rows, a
        // cell too few would lose a device.
        let metresPerDegree = Coordinate.earthRadius * .pi / 180
        let latitudeSpan = radius / metresPerDegree * 1.001 + 1e-9
        let south = max(-90, center.latitude - latitudeSpan)
        let north = min(90, center.latitude + latitudeSpan)
        // The widest longitude span of the circle is at its latitude farthest from the equator.
        let widest = max(abs(south), abs(north))
        let cosine = cos(min(89.9, widest) * .pi / 180)
        let longitudeSpan = min(180, radius / (metresPerDegree * max(cosine, 1e-6)) * 1.001 + 1e-9)
        let west = column(center.longitude - longitudeSpan)
        let east = column(center.longitude + longitudeSpan)
        return (row(south)...row(north)).map { row in (row * columns + west)...(row * columns + east) }
    }
}
