import EnrichmentCore
import Foundation
import TestSupport
import Testing

@Suite("The last-fix cell grid (audiences)")
struct LastFixCellsTests {
    /// A point `metres` from `center` towards `bearing` (radians), on the sphere distances are measured on.
    static func destination(_ center: Coordinate, metres: Double, bearing: Double) -> Coordinate {
        let d = metres / Coordinate.earthRadius
        let lat1 = center.latitude * .pi / 180
        let lng1 = center.longitude * .pi / 180
        let lat2 = asin(sin(lat1) * cos(d) + cos(lat1) * sin(d) * cos(bearing))
        let lng2 = lng1 + atan2(sin(bearing) * sin(d) * cos(lat1), cos(d) - sin(lat1) * sin(lat2))
        return Coordinate(latitude: lat2 * 180 / .pi, longitude: lng2 * 180 / .pi)
    }

    @Test("every point within the radius lies in one of the circle's cell ranges, at every latitude and size")
    func coversTheCircle() {
        var generator = SeededGenerator(seed: 11)
        for _ in 0..<4_000 {
            // A third of the circles near the antimeridian or a pole.
            let center = Coordinate(
                latitude: Bool.random(using: &generator)
                    ? Double.random(in: -89.9...89.9, using: &generator)
                    : (Bool.random(using: &generator) ? 1 : -1) * Double.random(in: 88...89.99, using: &generator),
                longitude: Int.random(in: 0..<3, using: &generator) == 0
                    ? (Bool.random(using: &generator) ? 1 : -1) * Double.random(in: 179...180, using: &generator)
                    : Double.random(in: -180...180, using: &generator))
            let radius = [1.0, 50, 500, 5_000, 50_000, 200_000].randomElement(using: &generator)!
            let ranges = LastFixCells.ranges(center: center, radius: radius)
            // No cell is read twice.
            let sorted = ranges.sorted { $0.lowerBound < $1.lowerBound }
            #expect(
                zip(sorted, sorted.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound }, "\(center) r=\(radius)")
            for _ in 0..<20 {
                // Mostly on the edge, where a bounding box too small would lose the point.
                let metres = radius * (Bool.random(using: &generator) ? 1 : Double.random(in: 0...1, using: &generator))
                let point = Self.destination(
                    center, metres: metres * 0.999_999, bearing: Double.random(in: 0..<(2 * .pi), using: &generator))
                guard center.distance(to: point) <= radius else { continue }
                // Across the antimeridian: the same place, on the other side.
                let longitude =
                    point.longitude > 180
                    ? point.longitude - 360 : point.longitude < -180 ? point.longitude + 360 : point.longitude
                let cell = LastFixCells.cell(latitude: point.latitude, longitude: longitude)
                #expect(ranges.contains { $0.contains(cell) }, "\(center) r=\(radius): \(point) in cell \(cell)")
            }
        }
    }

    @Test("cells are numbered row by row from the south-west; a row of the circle is one range")
    func numbering() {
        #expect(LastFixCells.cell(latitude: -90, longitude: -180) == 0)
        #expect(LastFixCells.cell(latitude: -90, longitude: -179.995) == 0)
        #expect(LastFixCells.cell(latitude: -90, longitude: -179.985) == 1)
        #expect(LastFixCells.cell(latitude: -89.985, longitude: -180) == 36_000)
        #expect(LastFixCells.cell(latitude: 90, longitude: 180) == 17_999 * 36_000 + 35_999)
        let ranges = LastFixCells.ranges(center: Coordinate(latitude: 48.8566, longitude: 2.3522), radius: 500)
        #expect(ranges.count == 2)
        #expect(ranges.allSatisfy { $0.count <= 3 })
    }

    @Test("a circle wider than a quarter of the Earth covers every point within it")
    func hugeCircles() {
        var generator = SeededGenerator(seed: 12)
        for center in [(0.0, 0.0), (30, 100), (-45, -170)].map({ Coordinate(latitude: $0.0, longitude: $0.1) }) {
            let radius = 15_000_000.0
            let ranges = LastFixCells.ranges(center: center, radius: radius)
            for _ in 0..<300 {
                let point = Self.destination(
                    center, metres: Double.random(in: 10_000_000...radius, using: &generator) * 0.999_999,
                    bearing: Double.random(in: 0..<(2 * .pi), using: &generator))
                guard center.distance(to: point) <= radius else { continue }
                let longitude = (point.longitude + 540).truncatingRemainder(dividingBy: 360) - 180
                let cell = LastFixCells.cell(latitude: point.latitude, longitude: longitude)
                #expect(ranges.contains { $0.contains(cell) }, "\(center): \(point) in cell \(cell)")
            }
        }
    }

    @Test("a circle across the antimeridian reads both sides; one around a pole reads its rows whole")
    func antimeridianAndPole() {
        let fiji = LastFixCells.ranges(center: Coordinate(latitude: -17.8, longitude: 179.95), radius: 20_000)
        let west = LastFixCells.cell(latitude: -17.8, longitude: -179.9)  // 15 km east of the centre
        let east = LastFixCells.cell(latitude: -17.8, longitude: 179.99)
        #expect(fiji.contains { $0.contains(west) } && fiji.contains { $0.contains(east) })
        let pole = LastFixCells.ranges(center: Coordinate(latitude: 89.5, longitude: 90), radius: 100_000)
        // The centre is 56 km from the pole, any point at 89.9° 11 km from it: every longitude is within 100 km.
        let far = LastFixCells.cell(latitude: 89.9, longitude: -120)
        #expect(pole.contains { $0.contains(far) })
    }

    @Test("a row near the top or bottom of a large circle is narrower than the circle's bounding box")
    func rowsFollowTheCircle() {
        let paris = Coordinate(latitude: 48.8566, longitude: 2.3522)
        let ranges = LastFixCells.ranges(center: paris, radius: 10_000)
        let cells = ranges.reduce(0) { $0 + $1.count }
        let widest = ranges.map(\.count).max() ?? 0
        // The box: 19 rows of the widest row's width; the disc is π/4 of it, plus the cells its edge crosses.
        #expect(ranges.count == 19)
        #expect(Double(cells) < 0.9 * Double(ranges.count * widest))
        #expect(ranges.first!.count < widest / 2 && ranges.last!.count < widest / 2)
    }
}
