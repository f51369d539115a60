import Foundation

/// A grid of cells of `1 / perDegree`° of latitude by `1 / perDegree`° of longitude, numbered row by row from the
/// south-west corner, so that one row of a circle's cells is one contiguous range of cell numbers. The stores
/// compute the same numbers in SQL from `(latitude + 90) * perDegree` and `(longitude + 180) * perDegree`,
/// floored: the same IEEE arithmetic as here.
public struct CellGrid: Sendable {
    /// Cells per degree.
    public let perDegree: Double
    let rows: Int64
    let columns: Int64

    public init(perDegree: Int64) {
        self.perDegree = Double(perDegree)
        rows = 180 * perDegree
        columns = 360 * perDegree
    }

    /// The cell of a point (the poles and the antimeridian clamp into the last row and column).
    public func cell(latitude: Double, longitude: Double) -> Int64 {
        row(latitude) * columns + column(longitude)
    }

    func row(_ latitude: Double) -> Int64 {
        min(rows - 1, max(0, Int64(((latitude + 90) * perDegree).rounded(.down))))
    }

    func column(_ longitude: Double) -> Int64 {
        min(columns - 1, max(0, Int64(((longitude + 180) * perDegree).rounded(.down))))
    }

    /// The ranges of cell numbers (inclusive) whose cells may hold a point within `radius` metres of `center`: one
    /// range per row of the circle's bounding box. A circle across the antimeridian is cut at it.
    public func ranges(center: Coordinate, radius: Double) -> [ClosedRange<Int64>] {
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

    /// The ranges of cells of a box, one per row (with a one-cell margin for points on its edges).
    public func ranges(south: Double, north: Double, west: Double, east: Double) -> [ClosedRange<Int64>] {
        let margin = 1 / perDegree
        let westColumn = column(west - margin)
        let eastColumn = column(east + margin)
        return (row(south - margin)...row(north + margin)).map { row in
            (row * columns + westColumn)...(row * columns + eastColumn)
        }
    }
}

/// The grid the stores index every device's last fix and zones of interest on, for audiences (`near`, `zoi`):
/// cells of 0.01° of latitude by 0.01° of longitude (about 1.1 km by 1.1 km × cos(latitude)).
public enum LastFixCells {
    public static let grid = CellGrid(perDegree: 100)
    /// Cells per degree (a cell's side is 0.01°).
    public static var perDegree: Double { grid.perDegree }

    public static func cell(latitude: Double, longitude: Double) -> Int64 {
        grid.cell(latitude: latitude, longitude: longitude)
    }

    public static func ranges(center: Coordinate, radius: Double) -> [ClosedRange<Int64>] {
        grid.ranges(center: center, radius: radius)
    }

    public static func ranges(south: Double, north: Double, west: Double, east: Double) -> [ClosedRange<Int64>] {
        grid.ranges(south: south, north: north, west: west, east: east)
    }

    /// `ranges` sorted, with overlapping and adjacent ones joined.
    public static func merged(_ ranges: [ClosedRange<Int64>]) -> [ClosedRange<Int64>] {
        var result: [ClosedRange<Int64>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = result.last, range.lowerBound <= last.upperBound + 1 {
                result[result.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                result.append(range)
            }
        }
        return result
    }
}

/// The finer grid visits are indexed on, for `visited` (a visit is near a POI at tens of metres): cells of
/// 0.001° (about 111 m by 111 m × cos(latitude)), so the cells read around a POI hold little more than its
/// neighbourhood.
public enum VisitCells {
    public static let grid = CellGrid(perDegree: 1_000)

    public static func cell(latitude: Double, longitude: Double) -> Int64 {
        grid.cell(latitude: latitude, longitude: longitude)
    }
}
