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

    /// The ranges of cell numbers (inclusive) whose cells may hold a point within `radius` metres of `center`: in
    /// each row of cells the circle crosses, from the circle's westmost to its eastmost point within that row (not
    /// the whole bounding box: a row near the circle's top or bottom is narrow, which leaves about a fifth fewer
    /// cells to read for a large circle). A row that crosses the antimeridian is two ranges, one each side; a row
    /// the circle covers all round (near a pole it contains) is the whole row.
    public func ranges(center: Coordinate, radius: Double) -> [ClosedRange<Int64>] {
        // Angles on the sphere every distance is measured on, with a margin: a cell too many costs a few rows, a
        // cell too few would lose a device.
        let angle = min(.pi, radius / Coordinate.earthRadius * 1.001 + 1e-9)
        let latitudeSpan = angle * 180 / .pi
        let south = max(-90, center.latitude - latitudeSpan)
        let north = min(90, center.latitude + latitudeSpan)
        let centreLatitude = center.latitude * .pi / 180
        // The circle is widest (in longitude) at this latitude, a little poleward of its centre.
        let ratio = sin(centreLatitude) / cos(angle)
        let widest = abs(ratio) <= 1 ? asin(ratio) : (centreLatitude >= 0 ? .pi / 2 : -.pi / 2)
        let haversineOfAngle = pow(sin(angle / 2), 2)
        var result: [ClosedRange<Int64>] = []
        for row in row(south)...row(north) {
            // Within the row's band of latitudes, the circle is widest at the latitude φ nearest `widest`; its half
            // width Δλ there solves the haversine formula, hav(angle) = hav(φ - φc) + cos φ cos φc hav(Δλ) (stable
            // for a radius of a metre, where the law of cosines loses the difference in rounding).
            let bandSouth = (Double(row) / perDegree - 90) * .pi / 180
            let bandNorth = (Double(row + 1) / perDegree - 90) * .pi / 180
            let latitude = min(bandNorth, max(bandSouth, widest))
            let divisor = cos(latitude) * cos(centreLatitude)
            let haversine =
                divisor > 1e-12
                ? (haversineOfAngle - pow(sin((latitude - centreLatitude) / 2), 2)) / divisor : 1
            let first = row * columns
            let halfWidth = 2 * asin(min(1, max(0, haversine)).squareRoot()) * 180 / .pi
            // All round: the circle holds the row's whole band of latitudes (near a pole it contains), spans nearly
            // all of it (its two ends would meet in one cell, read twice), or is wider than a quarter of the Earth,
            // where the latitude nearest `widest` is the row's narrowest, not its widest.
            guard haversine < 1, cos(angle) > 0, 2 * halfWidth < 360 - 2 / perDegree else {
                result.append(first...(first + columns - 1))
                continue
            }
            let west = center.longitude - halfWidth
            let east = center.longitude + halfWidth
            result.append((first + column(west))...(first + column(east)))
            // The part of the row beyond the antimeridian, on its other side.
            if west < -180 { result.append((first + column(west + 360))...(first + columns - 1)) }
            if east > 180 { result.append(first...(first + column(east - 360))) }
        }
        return result
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
