import Foundation

/// An immutable k-d tree over points on the unit sphere, answering exact nearest-k by great-circle distance.
///
/// Points are stored as 3-D unit vectors: the chord between two of them grows monotonically with their
/// great-circle distance, so Euclidean nearest neighbours in 3-D are exactly the great-circle ones.
public struct SpatialIndex: Sendable {
    private var xs: [Double] = []
    private var ys: [Double] = []
    private var zs: [Double] = []
    /// Caller's item number for each slot, in tree order.
    private var items: [Int32] = []
    /// Split axis of the node whose median sits at each slot (unused for leaf slots).
    private var axes: [UInt8] = []
    private static let leafSize = 8

    /// Builds the tree for `points`; results refer to points by their position in this array.
    public init(points: [Coordinate]) {
        let n = points.count
        precondition(n < Int(Int32.max), "too many points for the index")
        var xs = [Double](repeating: 0, count: n), ys = xs, zs = xs
        var items = [Int32](repeating: 0, count: n)
        var axes = [UInt8](repeating: 0, count: n)
        for (i, p) in points.enumerated() {
            let v = Self.unitVector(p)
            xs[i] = v.0; ys[i] = v.1; zs[i] = v.2; items[i] = Int32(i)
        }
        Self.build(&xs, &ys, &zs, &items, &axes, 0, n)
        self.xs = xs; self.ys = ys; self.zs = zs; self.items = items; self.axes = axes
    }

    /// Number of indexed points.
    public var count: Int { items.count }

    static func unitVector(_ p: Coordinate) -> (Double, Double, Double) {
        let lat = p.latitude * .pi / 180, lng = p.longitude * .pi / 180
        let c = cos(lat)
        return (c * cos(lng), c * sin(lng), sin(lat))
    }

    /// Squared chord length on the unit sphere for a great-circle distance in metres.
    static func chordSquared(metres: Double) -> Double {
        let angle = min(metres / Coordinate.earthRadius, .pi)
        let chord = 2 * sin(angle / 2)
        return chord * chord
    }

    private static func build(_ xs: inout [Double], _ ys: inout [Double], _ zs: inout [Double], _ items: inout [Int32],
                              _ axes: inout [UInt8], _ lo: Int, _ hi: Int) {
        guard hi - lo > leafSize else { return }
        // Split on the axis with the widest spread.
        var minX = Double.infinity, maxX = -Double.infinity, minY = minX, maxY = maxX, minZ = minX, maxZ = maxX
        for i in lo..<hi {
            minX = min(minX, xs[i]); maxX = max(maxX, xs[i])
            minY = min(minY, ys[i]); maxY = max(maxY, ys[i])
            minZ = min(minZ, zs[i]); maxZ = max(maxZ, zs[i])
        }
        let spreads = [maxX - minX, maxY - minY, maxZ - minZ]
        let axis = spreads.firstIndex(of: spreads.max()!)!
        let mid = (lo + hi) / 2
        select(&xs, &ys, &zs, &items, lo, hi, mid, axis)
        axes[mid] = UInt8(axis)
        build(&xs, &ys, &zs, &items, &axes, lo, mid)
        build(&xs, &ys, &zs, &items, &axes, mid + 1, hi)
    }

    /// Quickselect: puts the element of rank `k` (by `axis`) at `k`, smaller ones before, larger after.
    private static func select(_ xs: inout [Double], _ ys: inout [Double], _ zs: inout [Double], _ items: inout [Int32],
                               _ lo: Int, _ hi: Int, _ k: Int, _ axis: Int) {
        func key(_ i: Int) -> Double { axis == 0 ? xs[i] : (axis == 1 ? ys[i] : zs[i]) }
        func swapAt(_ a: Int, _ b: Int) {
            xs.swapAt(a, b); ys.swapAt(a, b); zs.swapAt(a, b); items.swapAt(a, b)
        }
        var left = lo, right = hi - 1
        while left < right {
            // Median of three pivots keeps sorted inputs fast.
            let m = (left + right) / 2
            if key(m) < key(left) { swapAt(m, left) }
            if key(right) < key(left) { swapAt(right, left) }
            if key(right) < key(m) { swapAt(right, m) }
            let pivot = key(m)
            var i = left, j = right
            while i <= j {
                while key(i) < pivot { i += 1 }
                while key(j) > pivot { j -= 1 }
                if i <= j { swapAt(i, j); i += 1; j -= 1 }
            }
            if k <= j { right = j } else if k >= i { left = i } else { return }
        }
    }

    /// The `k` nearest items to `point` (nearest first) within `maxMetres`, skipping items `accept` refuses.
    public func nearest(to point: Coordinate, k: Int, maxMetres: Double? = nil,
                        accept: ((Int) -> Bool)? = nil) -> [(item: Int, metres: Double)] {
        guard k > 0, !items.isEmpty else { return [] }
        let q = Self.unitVector(point)
        var heap = BoundedMaxHeap(capacity: k)
        let limit = maxMetres.map { Self.chordSquared(metres: $0) } ?? Double.infinity
        xs.withUnsafeBufferPointer { xs in
            ys.withUnsafeBufferPointer { ys in
                zs.withUnsafeBufferPointer { zs in
                    items.withUnsafeBufferPointer { items in
                        axes.withUnsafeBufferPointer { axes in
                            var search = Search(xs: xs, ys: ys, zs: zs, items: items, axes: axes,
                                                qx: q.0, qy: q.1, qz: q.2, limit: limit, accept: accept)
                            search.visit(0, items.count, &heap)
                        }
                    }
                }
            }
        }
        return heap.sortedAscending().map { entry in
            // Chord -> angle -> metres; exact inverse of the forward transform.
            let chord = sqrt(entry.distanceSquared)
            let metres = 2 * asin(min(1, chord / 2)) * Coordinate.earthRadius
            return (Int(entry.item), metres)
        }
    }

    private struct Search {
        let xs: UnsafeBufferPointer<Double>, ys: UnsafeBufferPointer<Double>, zs: UnsafeBufferPointer<Double>
        let items: UnsafeBufferPointer<Int32>
        let axes: UnsafeBufferPointer<UInt8>
        let qx: Double, qy: Double, qz: Double
        let limit: Double
        let accept: ((Int) -> Bool)?

        @inline(__always) func distanceSquared(_ i: Int) -> Double {
            let dx = xs[i] - qx, dy = ys[i] - qy, dz = zs[i] - qz
            return dx * dx + dy * dy + dz * dz
        }

        @inline(__always) func consider(_ i: Int, _ heap: inout BoundedMaxHeap) {
            let d = distanceSquared(i)
            guard d <= limit, d < heap.worst else { return }
            if let accept, !accept(Int(items[i])) { return }
            heap.insert(item: items[i], distanceSquared: d)
        }

        mutating func visit(_ lo: Int, _ hi: Int, _ heap: inout BoundedMaxHeap) {
            if hi - lo <= SpatialIndex.leafSize {
                for i in lo..<hi { consider(i, &heap) }
                return
            }
            let mid = (lo + hi) / 2
            consider(mid, &heap)
            let diff: Double
            switch axes[mid] {
            case 0: diff = qx - xs[mid]
            case 1: diff = qy - ys[mid]
            default: diff = qz - zs[mid]
            }
            if diff < 0 {
                visit(lo, mid, &heap)
                if diff * diff < min(heap.worst, limit) { visit(mid + 1, hi, &heap) }
            } else {
                visit(mid + 1, hi, &heap)
                if diff * diff < min(heap.worst, limit) { visit(lo, mid, &heap) }
            }
        }
    }
}
