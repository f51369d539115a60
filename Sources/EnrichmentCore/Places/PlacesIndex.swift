import Synchronization

/// The in-memory POI index used on the hot path: a k-d tree snapshot, replaced whole after each import.
///
/// SQLite stays the source of truth; the service loads this from the store at start and calls `upsert` after
/// every committed import so that both stay in step. Readers take a snapshot and never wait for a rebuild.
public final class PlacesIndex: Sendable {
    struct Snapshot: Sendable {
        var pois: [POI]
        var positions: [String: Int]
        var tree: SpatialIndex
    }

    private let snapshot: Mutex<Snapshot>
    /// Serialises writers so two imports cannot lose each other's POIs.
    private let writer = Mutex<Void>(())

    /// Builds the index over `pois` (later duplicates of a store id replace earlier ones).
    public init(pois: [POI] = []) {
        snapshot = Mutex(
            Self.makeSnapshot(merging: pois, into: Snapshot(pois: [], positions: [:], tree: SpatialIndex(points: []))))
    }

    private static func makeSnapshot(merging new: [POI], into old: Snapshot) -> Snapshot {
        var pois = old.pois
        var positions = old.positions
        for poi in new {
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

    /// Inserts or replaces POIs by store id and publishes a rebuilt tree.
    public func upsert(_ new: [POI]) {
        guard !new.isEmpty else { return }
        writer.withLock { _ in
            let current = snapshot.withLock { $0 }
            let next = Self.makeSnapshot(merging: new, into: current)
            snapshot.withLock { $0 = next }
        }
    }

    /// Number of POIs indexed.
    public var count: Int { snapshot.withLock { $0.pois.count } }

    /// Exact nearest POIs by great-circle (haversine) distance, nearest first; equal distances by store id.
    public func nearest(to point: Coordinate, query: PlacesQuery) -> [PlaceMatch] {
        let current = snapshot.withLock { $0 }
        return current.pois.withUnsafeBufferPointer { pois in
            Self.nearest(in: current.tree, pois, to: point, query: query, k: query.limit)
        }
    }

    /// The query's filter over POIs read in place (valid while `pois` is).
    private static func accept(_ query: PlacesQuery, _ pois: UnsafeBufferPointer<POI>) -> ((Int) -> Bool)? {
        query.filter.map { filter in { filter.matches(at: pois.baseAddress! + $0) } }
    }

    /// The `k` nearest POIs passing `query`, ties by store id.
    private static func nearest(
        in tree: SpatialIndex, _ pois: UnsafeBufferPointer<POI>, to point: Coordinate,
        query: PlacesQuery, k: Int
    ) -> [PlaceMatch] {
        tree.nearest(
            to: point, k: k, maxMetres: query.radius, accept: accept(query, pois),
            precedes: { pois[$0].storeId < pois[$1].storeId }
        )
        .map { PlaceMatch(poi: pois[$0.item], distance: $0.metres) }
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
        return current.pois.withUnsafeBufferPointer { pois in
            let perPage = max(1, query.limit)
            let skip = (max(1, page) - 1) * perPage
            let found = Self.nearest(in: current.tree, pois, to: point, query: query, k: skip + perPage)
            let total = current.tree.count(
                near: point, maxMetres: query.radius, accept: Self.accept(query, pois), limit: reach)
            return (Array(found.dropFirst(skip)), max(1, (total + perPage - 1) / perPage))
        }
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
