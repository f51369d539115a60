import Foundation

/// An immutable k-d tree over points on the unit sphere, answering exact nearest-k by great-circle distance.
///
/// Points are stored as 3-D unit vectors: the chord between two of them grows monotonically with their
/// great-circle distance, so the tree prunes by chord. The chord is only a candidate filter: every candidate that
/// can still rank is measured with the same haversine arithmetic as `Coordinate.distance(to:)`, and results are
/// ranked by those metres (ties by the caller's order), so they equal a brute-force haversine scan bit for bit.
public struct SpatialIndex: Sendable {
    private var xs: [Double] = []
    private var ys: [Double] = []
    private var zs: [Double] = []
    /// Latitude in radians, its cosine, and longitude in degrees, per slot: the haversine inputs.
    private var lats: [Double] = []
    private var cosLats: [Double] = []
    private var lngs: [Double] = []
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
        var lats = [Double](repeating: 0, count: n), cosLats = lats, lngs = lats
        for slot in 0..<n {
            let p = points[Int(items[slot])]
            lats[slot] = Coordinate.radians(p.latitude)
            cosLats[slot] = cos(lats[slot])
            lngs[slot] = p.longitude
        }
        self.xs = xs; self.ys = ys; self.zs = zs; self.items = items; self.axes = axes
        self.lats = lats; self.cosLats = cosLats; self.lngs = lngs
    }

    /// Number of indexed points.
    public var count: Int { items.count }

    static func unitVector(_ p: Coordinate) -> (Double, Double, Double) {
        let lat = p.latitude * .pi / 180, lng = p.longitude * .pi / 180
        let c = cos(lat)
        return (c * cos(lng), c * sin(lng), sin(lat))
    }

    /// Squared chord length on the unit sphere for a great-circle distance in metres, widened by the rounding margin.
    static func chordSquaredBound(metres: Double) -> Double {
        let angle = min(metres / Coordinate.earthRadius, .pi)
        let chord = 2 * sin(angle / 2) + BoundedMaxHeap.chordMargin
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
    ///
    /// Items at exactly equal distance are ordered by `precedes` (by item number when nil).
    public func nearest(to point: Coordinate, k: Int, maxMetres: Double? = nil,
                        accept: ((Int) -> Bool)? = nil,
                        precedes: ((Int, Int) -> Bool)? = nil) -> [(item: Int, metres: Double)] {
        guard k > 0, !items.isEmpty else { return [] }
        let q = Self.unitVector(point)
        let qLat = Coordinate.radians(point.latitude)
        var heap = BoundedMaxHeap(capacity: k, precedes: precedes)
        let limit = maxMetres.map { Self.chordSquaredBound(metres: $0) } ?? Double.infinity
        xs.withUnsafeBufferPointer { xs in
        ys.withUnsafeBufferPointer { ys in
        zs.withUnsafeBufferPointer { zs in
        items.withUnsafeBufferPointer { items in
        axes.withUnsafeBufferPointer { axes in
        lats.withUnsafeBufferPointer { lats in
        cosLats.withUnsafeBufferPointer { cosLats in
        lngs.withUnsafeBufferPointer { lngs in
            var search = Search(xs: xs, ys: ys, zs: zs, items: items, axes: axes, lats: lats, cosLats: cosLats, lngs: lngs,
                                qx: q.0, qy: q.1, qz: q.2, qLat: qLat, qCosLat: cos(qLat), qLng: point.longitude,
                                limit: limit, maxMetres: maxMetres ?? .infinity, accept: accept)
            search.visit(0, items.count, &heap)
        }}}}}}}}
        return heap.sortedAscending().map { (Int($0.item), $0.metres) }
    }

    /// How many items lie within `maxMetres` (haversine, inclusive) of `point` and pass `accept`.
    public func count(near point: Coordinate, maxMetres: Double?, accept: ((Int) -> Bool)? = nil) -> Int {
        guard let maxMetres else {
            guard let accept else { return items.count }
            return (0..<items.count).reduce(0) { $0 + (accept($1) ? 1 : 0) }
        }
        let q = Self.unitVector(point)
        let qLat = Coordinate.radians(point.latitude)
        return xs.withUnsafeBufferPointer { xs in
        ys.withUnsafeBufferPointer { ys in
        zs.withUnsafeBufferPointer { zs in
        items.withUnsafeBufferPointer { items in
        axes.withUnsafeBufferPointer { axes in
        lats.withUnsafeBufferPointer { lats in
        cosLats.withUnsafeBufferPointer { cosLats in
        lngs.withUnsafeBufferPointer { lngs in
            let search = Search(xs: xs, ys: ys, zs: zs, items: items, axes: axes, lats: lats, cosLats: cosLats, lngs: lngs,
                                qx: q.0, qy: q.1, qz: q.2, qLat: qLat, qCosLat: cos(qLat), qLng: point.longitude,
                                limit: Self.chordSquaredBound(metres: maxMetres), maxMetres: maxMetres, accept: accept)
            return search.count(0, items.count)
        }}}}}}}}
    }

    private struct Search {
        let xs: UnsafeBufferPointer<Double>, ys: UnsafeBufferPointer<Double>, zs: UnsafeBufferPointer<Double>
        let items: UnsafeBufferPointer<Int32>
        let axes: UnsafeBufferPointer<UInt8>
        let lats: UnsafeBufferPointer<Double>, cosLats: UnsafeBufferPointer<Double>, lngs: UnsafeBufferPointer<Double>
        let qx: Double, qy: Double, qz: Double
        let qLat: Double, qCosLat: Double, qLng: Double
        /// Squared chord bound of the radius (with margin); infinity without a radius.
        let limit: Double
        let maxMetres: Double
        let accept: ((Int) -> Bool)?

        @inline(__always) func consider(_ i: Int, _ heap: inout BoundedMaxHeap) {
            let dx = xs[i] - qx, dy = ys[i] - qy, dz = zs[i] - qz
            let d = dx * dx + dy * dy + dz * dz
            guard d <= limit, d <= heap.chordBound else { return }
            let metres = Coordinate.haversine(lat1: qLat, cosLat1: qCosLat, lng1: qLng,
                                              lat2: lats[i], cosLat2: cosLats[i], lng2: lngs[i])
            guard metres <= maxMetres, heap.admits(metres: metres) else { return }
            if let accept, !accept(Int(items[i])) { return }
            heap.insert(.init(item: items[i], metres: metres, chordSquared: d))
        }

        @inline(__always) func within(_ i: Int) -> Bool {
            let dx = xs[i] - qx, dy = ys[i] - qy, dz = zs[i] - qz
            guard dx * dx + dy * dy + dz * dz <= limit else { return false }
            let metres = Coordinate.haversine(lat1: qLat, cosLat1: qCosLat, lng1: qLng,
                                              lat2: lats[i], cosLat2: cosLats[i], lng2: lngs[i])
            guard metres <= maxMetres else { return false }
            return accept?(Int(items[i])) ?? true
        }

        func count(_ lo: Int, _ hi: Int) -> Int {
            if hi - lo <= SpatialIndex.leafSize {
                return (lo..<hi).reduce(0) { $0 + (within($1) ? 1 : 0) }
            }
            let mid = (lo + hi) / 2
            var total = within(mid) ? 1 : 0
            let diff: Double
            switch axes[mid] {
            case 0: diff = qx - xs[mid]
            case 1: diff = qy - ys[mid]
            default: diff = qz - zs[mid]
            }
            if diff < 0 || diff * diff <= limit { total += count(lo, mid) }
            if diff >= 0 || diff * diff <= limit { total += count(mid + 1, hi) }
            return total
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
                if diff * diff <= min(heap.chordBound, limit) { visit(mid + 1, hi, &heap) }
            } else {
                visit(mid + 1, hi, &heap)
                if diff * diff <= min(heap.chordBound, limit) { visit(lo, mid, &heap) }
            }
        }
    }
}
