import Synchronization

/// The in-memory POI index used on the hot path: a k-d tree over a base set, plus a small delta of POIs written
/// since (searched by brute force) and the base POIs those replace or delete.
///
/// SQLite stays the source of truth; the service loads this from the store at start and calls `upsert` or
/// `remove` after every committed change, so both stay in step. A change touches only the delta (one POI at 144k
/// places costs microseconds, not a rebuild); when the delta grows past `deltaLimit` the tree is rebuilt with it.
/// Readers take a snapshot and never wait for a change or a rebuild.
public final class PlacesIndex: Sendable {
    struct Snapshot: Sendable {
        var pois: [POI]
        var positions: [String: Int]
        var tree: SpatialIndex
        /// POIs written since the tree was built, by store id.
        var delta: [POI] = []
        var deltaPositions: [String: Int] = [:]
        /// Base POIs replaced (by a delta POI) or deleted.
        var hidden: Set<String> = []

        var count: Int { pois.count - hidden.count + delta.count }
    }

    private let snapshot: Mutex<Snapshot>
    /// Serialises writers so two imports cannot lose each other's POIs.
    private let writer = Mutex<Void>(())

    /// Builds the index over `pois` (later duplicates of a store id replace earlier ones).
    public init(pois: [POI] = []) {
        snapshot = Mutex(Self.build(pois))
    }

    /// A fresh tree over `pois` (later duplicates of a store id replace earlier ones), with an empty delta.
    private static func build(_ all: [POI]) -> Snapshot {
        var pois: [POI] = []
        var positions: [String: Int] = [:]
        for poi in all {
            if let index = positions[poi.storeId] {
                pois[index] = poi
            } else {
                positions[poi.storeId] = pois.count
                pois.append(poi)
            }
        }
        // Store the POIs in the tree's slot order, so a search (which walks contiguous slot ranges) and a filter
        // scan read them from memory in sequence rather than at random.
        var tree = SpatialIndex(points: pois.map(\.coordinate))
        let order = tree.renumberInSlotOrder()
        pois = order.map { pois[$0] }
        positions = Dictionary(uniqueKeysWithValues: pois.enumerated().map { ($1.storeId, $0) })
        return Snapshot(pois: pois, positions: positions, tree: tree)
    }

    /// Every POI of a snapshot: the visible base, then the delta.
    private static func everything(_ snapshot: Snapshot) -> [POI] {
        snapshot.pois.filter { !snapshot.hidden.contains($0.storeId) } + snapshot.delta
    }

    /// How large the delta may grow before the tree is rebuilt with it.
    static func deltaLimit(base: Int) -> Int { max(1_024, base / 32) }

    /// Inserts or replaces POIs by store id.
    public func upsert(_ new: [POI]) {
        guard !new.isEmpty else { return }
        writer.withLock { _ in
            var next = snapshot.withLock { $0 }
            if next.delta.count + new.count > Self.deltaLimit(base: next.pois.count) {
                next = Self.build(Self.everything(next) + new)
            } else {
                for poi in new {
                    if next.positions[poi.storeId] != nil { next.hidden.insert(poi.storeId) }
                    if let index = next.deltaPositions[poi.storeId] {
                        next.delta[index] = poi
                    } else {
                        next.deltaPositions[poi.storeId] = next.delta.count
                        next.delta.append(poi)
                    }
                }
            }
            snapshot.withLock { $0 = next }
        }
    }

    /// Removes POIs by store id; returns how many were indexed.
    @discardableResult
    public func remove(_ storeIds: [String]) -> Int {
        writer.withLock { _ in
            var next = snapshot.withLock { $0 }
            var removed = 0
            for id in storeIds {
                var found = false
                if next.positions[id] != nil, !next.hidden.contains(id) {
                    next.hidden.insert(id)
                    found = true
                }
                if let index = next.deltaPositions.removeValue(forKey: id) {
                    next.delta.remove(at: index)
                    for (position, poi) in next.delta.enumerated().dropFirst(index) {
                        next.deltaPositions[poi.storeId] = position
                    }
                    found = true
                }
                if found { removed += 1 }
            }
            snapshot.withLock { $0 = next }
            return removed
        }
    }

    /// The POI with this store id, if indexed.
    public func poi(storeId: String) -> POI? {
        let current = snapshot.withLock { $0 }
        if let index = current.deltaPositions[storeId] { return current.delta[index] }
        guard !current.hidden.contains(storeId), let index = current.positions[storeId] else { return nil }
        return current.pois[index]
    }

    /// Number of POIs indexed.
    public var count: Int { snapshot.withLock { $0.count } }

    /// Exact nearest POIs by great-circle (haversine) distance, nearest first; equal distances by store id.
    public func nearest(to point: Coordinate, query: PlacesQuery) -> [PlaceMatch] {
        Self.nearest(in: snapshot.withLock { $0 }, to: point, query: query, k: query.limit)
    }

    /// The query's filter over POIs read in place (valid while `pois` is), skipping hidden base POIs.
    private static func accept(_ query: PlacesQuery, _ pois: UnsafeBufferPointer<POI>, hidden: Set<String>)
        -> ((Int) -> Bool)?
    {
        let filter = query.filter.map { filter in { (i: Int) in filter.matches(at: pois.baseAddress! + i) } }
        guard !hidden.isEmpty else { return filter }
        return { i in !hidden.contains(pois[i].storeId) && (filter?(i) ?? true) }
    }

    /// The delta POIs that pass `query`, with their distances.
    private static func deltaMatches(_ snapshot: Snapshot, to point: Coordinate, query: PlacesQuery) -> [PlaceMatch] {
        var found: [PlaceMatch] = []
        for poi in snapshot.delta where query.accepts(poi) {
            let metres = point.distance(to: poi.coordinate)
            if let radius = query.radius, metres > radius { continue }
            found.append(PlaceMatch(poi: poi, distance: metres))
        }
        return found
    }

    /// The `k` nearest POIs passing `query`, ties by store id: the tree's (without hidden ones), merged with the
    /// delta's.
    private static func nearest(in current: Snapshot, to point: Coordinate, query: PlacesQuery, k: Int) -> [PlaceMatch]
    {
        let base = current.pois.withUnsafeBufferPointer { pois in
            current.tree.nearest(
                to: point, k: k, maxMetres: query.radius, accept: accept(query, pois, hidden: current.hidden),
                precedes: { pois[$0].storeId < pois[$1].storeId }
            )
            .map { PlaceMatch(poi: pois[$0.item], distance: $0.metres) }
        }
        guard !current.delta.isEmpty else { return base }
        var merged = base + deltaMatches(current, to: point, query: query)
        merged.sort { $0.distance != $1.distance ? $0.distance < $1.distance : $0.poi.storeId < $1.poi.storeId }
        return Array(merged.prefix(k))
    }
}

extension PlacesIndex {
    /// One page of a Woosmap-style search and the number of pages the matches fill, counting at most
    /// `reach` matches (results past it cannot be paged to).
    public func search(
        near point: Coordinate, query: PlacesQuery, page: Int,
        reach: Int = .max
    ) -> (matches: [PlaceMatch], pageCount: Int) {
        let current = snapshot.withLock { $0 }
        let perPage = max(1, query.limit)
        let skip = (max(1, page) - 1) * perPage
        let found = Self.nearest(in: current, to: point, query: query, k: skip + perPage)
        let inTree = current.pois.withUnsafeBufferPointer { pois in
            current.tree.count(
                near: point, maxMetres: query.radius, accept: Self.accept(query, pois, hidden: current.hidden),
                limit: reach)
        }
        let total = min(reach, inTree + Self.deltaMatches(current, to: point, query: query).count)
        return (Array(found.dropFirst(skip)), max(1, (total + perPage - 1) / perPage))
    }
}

/// The embedded places provider: nearest POIs from the in-memory index.
public struct LocalPlacesProvider: PlacesProvider {
    public let name = "local"
    public let index: PlacesIndex
    public var answersImmediately: Bool { true }

    public init(index: PlacesIndex) { self.index = index }

    public func nearest(to point: Coordinate, query: PlacesQuery) async throws(PlacesError) -> [PlaceMatch] {
        index.nearest(to: point, query: query)
    }
}
