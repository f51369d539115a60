extension GeoPolygon {
    /// What makes a ring unusable as a polygon.
    public enum Flaw: Sendable, Equatable {
        /// Fewer than 3 vertices.
        case tooFewVertices(Int)
        /// More vertices than allowed.
        case tooManyVertices(Int)
        /// The last vertex repeats the first: the ring is open (it closes by itself).
        case closedRing
        /// Vertex `index` repeats vertex `earlier`.
        case repeatedVertex(index: Int, earlier: Int)
        /// The vertices span more than 180° of longitude: the ring would cross the antimeridian.
        case crossesAntimeridian
        /// Edge `first` (from vertex `first` to the next) and edge `second` cross, touch or overlap.
        case crossingEdges(first: Int, second: Int)
        /// The vertices lie on one line.
        case noArea
    }

    /// The first thing wrong with `vertices` as a polygon (nil: it is a simple polygon), checked in this order:
    /// 3 to `maximumVertices` vertices, an open ring, no vertex twice, at most 180° of longitude, no two edges that
    /// cross or touch (adjacent edges may only share their vertex), some area.
    public static func flaw(of vertices: [Coordinate], maximumVertices: Int) -> Flaw? {
        let count = vertices.count
        guard count >= 3 else { return .tooFewVertices(count) }
        guard count <= maximumVertices else { return .tooManyVertices(count) }
        if vertices[0] == vertices[count - 1] { return .closedRing }
        var seen: [Coordinate: Int] = [:]
        for (index, vertex) in vertices.enumerated() {
            if let earlier = seen[vertex] { return .repeatedVertex(index: index, earlier: earlier) }
            seen[vertex] = index
        }
        let polygon = GeoPolygon(unchecked: vertices)
        if polygon.east - polygon.west > 180 { return .crossesAntimeridian }
        if let (first, second) = crossingEdges(vertices) { return .crossingEdges(first: first, second: second) }
        var twiceArea = 0.0
        var j = count - 1
        for i in 0..<count {
            twiceArea += vertices[j].longitude * vertices[i].latitude - vertices[i].longitude * vertices[j].latitude
            j = i
        }
        return twiceArea == 0 ? .noArea : nil
    }

    /// The first two edges (by index) that meet other than at the vertex two adjacent edges share.
    static func crossingEdges(_ vertices: [Coordinate]) -> (Int, Int)? {
        let count = vertices.count
        func edge(_ index: Int) -> (Coordinate, Coordinate) { (vertices[index], vertices[(index + 1) % count]) }
        for i in 0..<count {
            let (a, b) = edge(i)
            // The next edge shares b: it may not fold back along this one.
            let c = vertices[(i + 2) % count]
            if orientation(a, b, c) == 0, lies(c, on: a, b) || lies(a, on: b, c) {
                return (min(i, (i + 1) % count), max(i, (i + 1) % count))
            }
            // The edges that share no vertex with this one.
            for j in stride(from: i + 2, to: count, by: 1) where !(i == 0 && j == count - 1) {
                let (c, d) = edge(j)
                if segmentsMeet(a, b, c, d) { return (i, j) }
            }
        }
        return nil
    }

    /// Twice the signed area of the triangle a, b, c in degrees: > 0 when c is left of a→b, 0 when in line.
    static func orientation(_ a: Coordinate, _ b: Coordinate, _ c: Coordinate) -> Double {
        (b.longitude - a.longitude) * (c.latitude - a.latitude) - (b.latitude - a.latitude)
            * (c.longitude - a.longitude)
    }

    /// Whether `p`, in line with a and b, lies between them (ends included).
    static func lies(_ p: Coordinate, on a: Coordinate, _ b: Coordinate) -> Bool {
        p.longitude >= min(a.longitude, b.longitude) && p.longitude <= max(a.longitude, b.longitude)
            && p.latitude >= min(a.latitude, b.latitude) && p.latitude <= max(a.latitude, b.latitude)
    }

    /// Whether segments a-b and c-d have a point in common.
    static func segmentsMeet(_ a: Coordinate, _ b: Coordinate, _ c: Coordinate, _ d: Coordinate) -> Bool {
        let o1 = orientation(c, d, a)
        let o2 = orientation(c, d, b)
        let o3 = orientation(a, b, c)
        let o4 = orientation(a, b, d)
        if ((o1 > 0 && o2 < 0) || (o1 < 0 && o2 > 0)) && ((o3 > 0 && o4 < 0) || (o3 < 0 && o4 > 0)) { return true }
        return (o1 == 0 && lies(a, on: c, d)) || (o2 == 0 && lies(b, on: c, d)) || (o3 == 0 && lies(c, on: a, b))
            || (o4 == 0 && lies(d, on: a, b))
    }
}
