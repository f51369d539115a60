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
        var xs = [Double](repeating: 0, count: n)
        var ys = xs
        var zs = xs
        var items = [Int32](repeating: 0, count: n)
        var axes = [UInt8](repeating: 0, count: n)
        for (i, p) in points.enumerated() {
            let v = Self.unitVector(p)
            xs[i] = v.0
            ys[i] = v.1
            zs[i] = v.2
            items[i] = Int32(i)
        }
        Self.build(&xs, &ys, &zs, &items, &axes, 0, n)
        var lats = [Double](repeating: 0, count: n)
        var cosLats = lats
        var lngs = lats
        for slot in 0..<n {
            let p = points[Int(items[slot])]
            lats[slot] = Coordinate.radians(p.latitude)
            cosLats[slot] = cos(lats[slot])
            lngs[slot] = p.longitude
        }
        self.xs = xs
        self.ys = ys
        self.zs = zs
        self.items = items
        self.axes = axes
        self.lats = lats
        self.cosLats = cosLats
        self.lngs = lngs
    }

    /// Makes each slot's item number the slot itself; returns the former item number of each slot, so the caller
    /// can lay its own data out in the same order.
    public mutating func renumberInSlotOrder() -> [Int] {
        let former = items.map(Int.init)
        for slot in items.indices { items[slot] = Int32(slot) }
        return former
    }

    /// Number of indexed points.
    public var count: Int { items.count }

    static func unitVector(_ p: Coordinate) -> (Double, Double, Double) {
        let lat = p.latitude * .pi / 180
        let lng = p.longitude * .pi / 180
        let c = cos(lat)
        return (c * cos(lng), c * sin(lng), sin(lat))
    }

    /// Squared chord length on the unit sphere for a great-circle distance in metres, widened by the rounding margin.
    static func chordSquaredBound(metres: Double) -> Double {
        let angle = min(metres / Coordinate.earthRadius, .pi)
        let chord = 2 * sin(angle / 2) + BoundedMaxHeap.chordMargin
        return chord * chord
    }

    private static func build(
        _ xs: inout [Double], _ ys: inout [Double], _ zs: inout [Double], _ items: inout [Int32],
        _ axes: inout [UInt8], _ lo: Int, _ hi: Int
    ) {
        // On raw buffers: the arrays are not resized while building, and a million points take a second less
        // than through checked subscripts.
        xs.withUnsafeMutableBufferPointer { xs in
            ys.withUnsafeMutableBufferPointer { ys in
                zs.withUnsafeMutableBufferPointer { zs in
                    items.withUnsafeMutableBufferPointer { items in
                        axes.withUnsafeMutableBufferPointer { axes in
                            build(Buffers(xs: xs, ys: ys, zs: zs, items: items, axes: axes), lo, hi, split: 2)
                        }
                    }
                }
            }
        }
    }

    /// The tree's columns while it is built (disjoint ranges may be built on several threads).
    private struct Buffers: @unchecked Sendable {
        let xs: UnsafeMutableBufferPointer<Double>
        let ys: UnsafeMutableBufferPointer<Double>
        let zs: UnsafeMutableBufferPointer<Double>
        let items: UnsafeMutableBufferPointer<Int32>
        let axes: UnsafeMutableBufferPointer<UInt8>

        @inline(__always) func key(_ i: Int, _ axis: Int) -> Double {
            axis == 0 ? xs[i] : (axis == 1 ? ys[i] : zs[i])
        }

        @inline(__always) func swapAt(_ a: Int, _ b: Int) {
            xs.swapAt(a, b)
            ys.swapAt(a, b)
            zs.swapAt(a, b)
            items.swapAt(a, b)
        }
    }

    /// Below `split` levels, large halves are built side by side (a million points on 2 cores).
    private static func build(_ b: Buffers, _ lo: Int, _ hi: Int, split: Int = 0) {
        guard hi - lo > leafSize else { return }
        // Split on the axis with the widest spread (the first of equal ones).
        var minX = Double.infinity
        var maxX = -Double.infinity
        var minY = minX
        var maxY = maxX
        var minZ = minX
        var maxZ = maxX
        for i in lo..<hi {
            minX = min(minX, b.xs[i])
            maxX = max(maxX, b.xs[i])
            minY = min(minY, b.ys[i])
            maxY = max(maxY, b.ys[i])
            minZ = min(minZ, b.zs[i])
            maxZ = max(maxZ, b.zs[i])
        }
        let (sx, sy, sz) = (maxX - minX, maxY - minY, maxZ - minZ)
        let widest = max(sx, sy, sz)
        let axis = sx == widest ? 0 : (sy == widest ? 1 : 2)
        let mid = (lo + hi) / 2
        select(b, lo, hi, mid, axis)
        b.axes[mid] = UInt8(axis)
        if split > 0, hi - lo > 50_000 {
            DispatchQueue.concurrentPerform(iterations: 2) { half in
                if half == 0 { build(b, lo, mid, split: split - 1) } else { build(b, mid + 1, hi, split: split - 1) }
            }
        } else {
            build(b, lo, mid)
            build(b, mid + 1, hi)
        }
    }

    /// Quickselect: puts the element of rank `k` (by `axis`) at `k`, smaller ones before, larger after.
    private static func select(_ b: Buffers, _ lo: Int, _ hi: Int, _ k: Int, _ axis: Int) {
        var left = lo
        var right = hi - 1
        while left < right {
            // Median of three pivots keeps sorted inputs fast.
            let m = (left + right) / 2
            if b.key(m, axis) < b.key(left, axis) { b.swapAt(m, left) }
            if b.key(right, axis) < b.key(left, axis) { b.swapAt(right, left) }
            if b.key(right, axis) < b.key(m, axis) { b.swapAt(right, m) }
            let pivot = b.key(m, axis)
            var i = left
            var j = right
            while i <= j {
                while b.key(i, axis) < pivot { i += 1 }
                while b.key(j, axis) > pivot { j -= 1 }
                if i <= j {
                    b.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            if k <= j { right = j } else if k >= i { left = i } else { return }
        }
    }

    /// The `k` nearest items to `point` (nearest first) within `maxMetres`, skipping items `accept` refuses.
    ///
    /// Items at exactly equal distance are ordered by `precedes` (by item number when nil).
    public func nearest(
        to point: Coordinate, k: Int, maxMetres: Double? = nil,
        accept: ((Int) -> Bool)? = nil,
        precedes: ((Int, Int) -> Bool)? = nil
    ) -> [(item: Int, metres: Double)] {
        guard k > 0, !items.isEmpty else { return [] }
        var heap = BoundedMaxHeap(capacity: k)
        // Candidates that left the heap or just missed it but lie within the rounding margin of its worst.
        var nearMisses: [BoundedMaxHeap.Entry] = []
        let limit = maxMetres.map { Self.chordSquaredBound(metres: $0) } ?? Double.infinity
        withSearch(around: point, limit: limit, accept: accept) { $0.visit(0, items.count, &heap, &nearMisses) }
        // Re-rank every candidate within the final bound by haversine metres, ties by the caller's order.
        let origin = Origin(point)
        let bound = heap.chordBound
        var ranked: [(item: Int, metres: Double)] = []
        ranked.reserveCapacity(heap.entries.count + nearMisses.count)
        func rank(_ entry: BoundedMaxHeap.Entry) {
            guard entry.chordSquared <= bound else { return }
            let slot = Int(entry.slot)
            let metres = self.metres(from: origin, toSlot: slot)
            if let maxMetres, metres > maxMetres { return }
            ranked.append((Int(items[slot]), metres))
        }
        heap.entries.forEach(rank)
        nearMisses.forEach(rank)
        ranked.sort { a, b in
            if a.metres != b.metres { return a.metres < b.metres }
            return precedes?(a.item, b.item) ?? (a.item < b.item)
        }
        if ranked.count > k { ranked.removeLast(ranked.count - k) }
        return ranked
    }

    /// How many items lie within `maxMetres` (haversine, inclusive) of `point` and pass `accept`, counting no
    /// further than `limit` (so a broad filter stops early).
    public func count(near point: Coordinate, maxMetres: Double?, accept: ((Int) -> Bool)? = nil, limit: Int = .max)
        -> Int
    {
        var total = 0
        guard let maxMetres else {
            guard let accept else { return min(items.count, limit) }
            for item in 0..<items.count where accept(item) {
                total += 1
                if total >= limit { break }
            }
            return total
        }
        let origin = Origin(point)
        withSearch(around: point, limit: Self.chordSquaredBound(metres: maxMetres), accept: accept) { search in
            _ = search.collect(0, items.count) { slot in
                if metres(from: origin, toSlot: slot) <= maxMetres { total += 1 }
                return total < limit
            }
        }
        return total
    }

    /// A query point prepared for the haversine kernel.
    private struct Origin {
        let latitude: Double, cosLatitude: Double, longitude: Double
        init(_ point: Coordinate) {
            latitude = Coordinate.radians(point.latitude)
            cosLatitude = cos(latitude)
            longitude = point.longitude
        }
    }

    /// Haversine metres from `origin` to the point in `slot`, bit-identical to `Coordinate.distance(to:)`.
    @inline(__always) private func metres(from origin: Origin, toSlot slot: Int) -> Double {
        Coordinate.haversine(
            lat1: origin.latitude, cosLat1: origin.cosLatitude, lng1: origin.longitude,
            lat2: lats[slot], cosLat2: cosLats[slot], lng2: lngs[slot])
    }

    /// Runs `body` with a tree walker for `point` over the index's buffers.
    private func withSearch(
        around point: Coordinate, limit: Double, accept: ((Int) -> Bool)?, _ body: (inout Search) -> Void
    ) {
        let q = Self.unitVector(point)
        xs.withUnsafeBufferPointer { xs in
            ys.withUnsafeBufferPointer { ys in
                zs.withUnsafeBufferPointer { zs in
                    items.withUnsafeBufferPointer { items in
                        axes.withUnsafeBufferPointer { axes in
                            var search = Search(
                                xs: xs, ys: ys, zs: zs, items: items, axes: axes,
                                qx: q.0, qy: q.1, qz: q.2, limit: limit, accept: accept)
                            body(&search)
                        }
                    }
                }
            }
        }
    }

    private struct Search {
        let xs: UnsafeBufferPointer<Double>, ys: UnsafeBufferPointer<Double>, zs: UnsafeBufferPointer<Double>
        let items: UnsafeBufferPointer<Int32>
        let axes: UnsafeBufferPointer<UInt8>
        let qx: Double, qy: Double, qz: Double
        /// Squared chord bound of the radius (with margin); infinity without a radius.
        let limit: Double
        let accept: ((Int) -> Bool)?

        @inline(__always) func chordSquared(_ i: Int) -> Double {
            let dx = xs[i] - qx
            let dy = ys[i] - qy
            let dz = zs[i] - qz
            return dx * dx + dy * dy + dz * dz
        }

        @inline(__always) func split(_ mid: Int) -> Double {
            switch axes[mid] {
            case 0: qx - xs[mid]
            case 1: qy - ys[mid]
            default: qz - zs[mid]
            }
        }

        @inline(__always) func consider(
            _ i: Int, _ heap: inout BoundedMaxHeap, _ nearMisses: inout [BoundedMaxHeap.Entry]
        ) {
            let d = chordSquared(i)
            guard d <= limit, d <= heap.chordBound else { return }
            if let accept, !accept(Int(items[i])) { return }
            // A dropped point can still rank only if it ties the worst kept one within the margin: rare.
            if let dropped = heap.insert(.init(slot: Int32(i), chordSquared: d)),
                dropped.chordSquared <= heap.chordBound
            {
                nearMisses.append(dropped)
            }
        }

        func visit(_ lo: Int, _ hi: Int, _ heap: inout BoundedMaxHeap, _ nearMisses: inout [BoundedMaxHeap.Entry]) {
            if hi - lo <= SpatialIndex.leafSize {
                for i in lo..<hi { consider(i, &heap, &nearMisses) }
                return
            }
            let mid = (lo + hi) / 2
            consider(mid, &heap, &nearMisses)
            let diff = split(mid)
            if diff < 0 {
                visit(lo, mid, &heap, &nearMisses)
                if diff * diff <= min(heap.chordBound, limit) { visit(mid + 1, hi, &heap, &nearMisses) }
            } else {
                visit(mid + 1, hi, &heap, &nearMisses)
                if diff * diff <= min(heap.chordBound, limit) { visit(lo, mid, &heap, &nearMisses) }
            }
        }

        /// Calls `body` with the slot of every accepted point within the chord limit until it returns false;
        /// returns false when stopped.
        func collect(_ lo: Int, _ hi: Int, _ body: (Int) -> Bool) -> Bool {
            if hi - lo <= SpatialIndex.leafSize {
                for i in lo..<hi where chordSquared(i) <= limit && (accept?(Int(items[i])) ?? true) {
                    guard body(i) else { return false }
                }
                return true
            }
            let mid = (lo + hi) / 2
            if chordSquared(mid) <= limit, accept?(Int(items[mid])) ?? true, !body(mid) { return false }
            let diff = split(mid)
            if diff < 0 || diff * diff <= limit, !collect(lo, mid, body) { return false }
            if diff >= 0 || diff * diff <= limit, !collect(mid + 1, hi, body) { return false }
            return true
        }
    }
}
