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
        /// The base POIs, packed, in the tree's slot order.
        var records: PackedPOIs
        var tree: SpatialIndex
        /// POIs written since the tree was built, by store id.
        var delta: [POI] = []
        var deltaPositions: [String: Int] = [:]
        /// Base POIs replaced (by a delta POI) or deleted, by their position in `records` (a search checks every
        /// POI it visits: an integer, not a store id made into a string and hashed).
        var hidden: Set<Int> = []
        /// Until `load`: every store id removed, so that the loaded base does not bring it back.
        var removedBeforeLoad: Set<String>?

        var count: Int { records.count - hidden.count + delta.count }
    }

    /// POIs gathered one at a time (from a store's cursor) for an index, packed as they come: building holds the
    /// packed bytes, never every POI as a value.
    public struct Builder: Sendable {
        var records = PackedPOIs()
        /// Records replaced by a later one with the same store id.
        var replaced: [Int] = []

        /// `uniqueIds`: the caller guarantees no two POIs share a store id (a store's rows), so none is looked up
        /// while gathering.
        public init(expected: Int = 0, uniqueIds: Bool = false) {
            records.indexesIds = !uniqueIds
            records.reserve(expected)
        }

        /// Adds a POI; a later one with the same store id replaces it.
        public mutating func add(_ poi: POI) {
            if let old = records.append(poi) { replaced.append(old) }
        }

        /// Adds what another builder of unique rows gathered (a scan done in parts, side by side).
        public mutating func add(contentsOf other: Builder) {
            records.append(contentsOf: other.records)
        }

        /// Adds a stored row as it is read (no `POI` made; see `RawPOIRow`).
        public mutating func add(raw row: RawPOIRow) {
            if let old = records.append(raw: row) { replaced.append(old) }
        }

        mutating func add(recordOf other: PackedPOIs, at i: Int) {
            if let old = records.append(recordOf: other, at: i) { replaced.append(old) }
        }

        public var count: Int { records.count - replaced.count }
    }

    /// A snapshot shared by reference: a reader takes it with one retain, not one per array it holds.
    final class Shared: Sendable {
        let value: Snapshot
        init(_ value: Snapshot) { self.value = value }
    }

    private let snapshot: Mutex<Shared>
    /// Serialises writers so two imports cannot lose each other's POIs.
    private let writer = Mutex<Void>(())

    /// Builds the index over `pois` (later duplicates of a store id replace earlier ones).
    public convenience init(pois: [POI] = []) {
        var builder = Builder(expected: pois.count)
        for poi in pois { builder.add(poi) }
        self.init(builder)
    }

    /// Builds the index over what `builder` gathered.
    public init(_ builder: Builder) {
        snapshot = Mutex(Shared(Self.build(builder)))
    }

    /// An empty index whose base comes later through `load`; changes meanwhile are kept and win over it.
    public init(awaitingLoad: Void) {
        var empty = Self.build(Builder())
        empty.removedBeforeLoad = []
        snapshot = Mutex(Shared(empty))
    }

    /// Replaces the base with what `builder` gathered (a load in the background), keeping the changes made since
    /// this index was created: they were committed while the load read the store, so they win over it.
    public func load(_ builder: Builder) {
        let base = Self.build(builder)
        writer.withLock { _ in
            let current = snapshot.withLock { $0 }.value
            var next = base
            for poi in current.delta {
                if let record = next.records.record(storeId: poi.storeId) { next.hidden.insert(record) }
                next.deltaPositions[poi.storeId] = next.delta.count
                next.delta.append(poi)
            }
            for id in current.removedBeforeLoad ?? [] {
                if let record = next.records.record(storeId: id) { next.hidden.insert(record) }
            }
            snapshot.withLock { $0 = Shared(next) }
        }
    }

    /// A fresh tree over the builder's POIs (replaced ones left out), with an empty delta.
    private static func build(_ builder: Builder) -> Snapshot {
        let gathered = builder.records
        var dead = [Bool](repeating: false, count: gathered.count)
        for i in builder.replaced { dead[i] = true }
        var live: [Int] = []
        live.reserveCapacity(gathered.count - builder.replaced.count)
        for i in 0..<gathered.count where !dead[i] { live.append(i) }
        // Store the POIs in the tree's slot order, so a search (which walks contiguous slot ranges) and a filter
        // scan read them from memory in sequence rather than at random.
        var tree = SpatialIndex(points: live.map { gathered.coordinate(at: $0) })
        let order = tree.renumberInSlotOrder()
        let records = PackedPOIs.reordered(gathered, order.map { live[$0] })
        return Snapshot(records: records, tree: tree)
    }

    /// Every POI of a snapshot, packed: the visible base (as it is), then the delta.
    private static func everything(_ snapshot: Snapshot, then more: [POI]) -> Builder {
        var builder = Builder(expected: snapshot.count + more.count)
        for i in 0..<snapshot.records.count where snapshot.hidden.isEmpty || !snapshot.hidden.contains(i) {
            builder.add(recordOf: snapshot.records, at: i)
        }
        for poi in snapshot.delta + more { builder.add(poi) }
        return builder
    }

    /// How large the delta may grow before the tree is rebuilt with it.
    static func deltaLimit(base: Int) -> Int { max(1_024, base / 32) }

    /// Inserts or replaces POIs by store id.
    public func upsert(_ new: [POI]) {
        guard !new.isEmpty else { return }
        writer.withLock { _ in
            var next = snapshot.withLock { $0 }.value
            if next.delta.count + new.count > Self.deltaLimit(base: next.records.count) {
                next = Self.build(Self.everything(next, then: new))
            } else {
                for poi in new {
                    if let record = next.records.record(storeId: poi.storeId) { next.hidden.insert(record) }
                    if let index = next.deltaPositions[poi.storeId] {
                        next.delta[index] = poi
                    } else {
                        next.deltaPositions[poi.storeId] = next.delta.count
                        next.delta.append(poi)
                    }
                }
            }
            snapshot.withLock { $0 = Shared(next) }
        }
    }

    /// Removes POIs by store id; returns how many were indexed.
    @discardableResult
    public func remove(_ storeIds: [String]) -> Int {
        writer.withLock { _ in
            var next = snapshot.withLock { $0 }.value
            var removed = 0
            for id in storeIds {
                next.removedBeforeLoad?.insert(id)
                var found = false
                if let record = next.records.record(storeId: id), next.hidden.insert(record).inserted {
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
            snapshot.withLock { $0 = Shared(next) }
            return removed
        }
    }

    /// The POI with this store id, if indexed.
    public func poi(storeId: String) -> POI? {
        let current = snapshot.withLock { $0 }.value
        if let index = current.deltaPositions[storeId] { return current.delta[index] }
        guard let index = current.records.record(storeId: storeId), !current.hidden.contains(index) else {
            return nil
        }
        return current.records.poi(at: index)
    }

    /// Number of POIs indexed.
    public var count: Int { snapshot.withLock { $0 }.value.count }

    /// The positions of every indexed POI that passes `filter` (a scan of the whole index), or nil when more than
    /// `limit` pass.
    public func positions(matching filter: PlaceFilter, limit: Int) -> [Coordinate]? {
        let current = snapshot.withLock { $0 }.value
        var found: [Coordinate] = []
        let records = current.records
        for i in 0..<records.count where records.matches(filter, at: i) {
            if !current.hidden.isEmpty, current.hidden.contains(i) { continue }
            found.append(records.coordinate(at: i))
            if found.count > limit { return nil }
        }
        for poi in current.delta where filter.matches(poi) {
            found.append(poi.coordinate)
            if found.count > limit { return nil }
        }
        return found
    }

    /// Exact nearest POIs by great-circle (haversine) distance, nearest first; equal distances by store id.
    public func nearest(to point: Coordinate, query: PlacesQuery) -> [PlaceMatch] {
        let shared = snapshot.withLock { $0 }
        return Self.nearest(in: shared.value, to: point, query: query, k: query.limit)
    }

    /// The query's filter over the packed base, skipping hidden base POIs.
    private static func accept(_ query: PlacesQuery, _ records: PackedPOIs, hidden: Set<Int>) -> ((Int) -> Bool)? {
        let filter = query.filter.map { filter in { (i: Int) in records.matches(filter, at: i) } }
        guard !hidden.isEmpty else { return filter }
        return { i in !hidden.contains(i) && (filter?(i) ?? true) }
    }

    /// The delta POIs that pass `query`, as (distance, position in the delta): nothing is copied for the many that
    /// a search leaves out.
    private static func deltaCandidates(_ snapshot: Snapshot, to point: Coordinate, query: PlacesQuery) -> [(
        metres: Double, position: Int
    )] {
        var found: [(metres: Double, position: Int)] = []
        for position in snapshot.delta.indices where query.accepts(snapshot.delta[position]) {
            let metres = point.distance(to: snapshot.delta[position].coordinate)
            if let radius = query.radius, metres > radius { continue }
            found.append((metres, position))
        }
        return found
    }

    /// The `k` nearest POIs passing `query`, ties by store id: the tree's (without hidden ones), merged with the
    /// delta's.
    private static func nearest(in current: Snapshot, to point: Coordinate, query: PlacesQuery, k: Int) -> [PlaceMatch]
    {
        let records = current.records
        let base = current.tree.nearest(
            to: point, k: k, maxMetres: query.radius, accept: accept(query, records, hidden: current.hidden),
            precedes: { records.storeId(at: $0) < records.storeId(at: $1) }
        )
        .map { PlaceMatch(record: records.record(at: $0.item, details: query.details), distance: $0.metres) }
        guard !current.delta.isEmpty else { return base }
        var candidates = deltaCandidates(current, to: point, query: query)
        guard !candidates.isEmpty else { return base }
        let delta = current.delta
        candidates.sort {
            $0.metres != $1.metres ? $0.metres < $1.metres : delta[$0.position].storeId < delta[$1.position].storeId
        }
        var merged = base
        merged += candidates.prefix(k).map { PlaceMatch(poi: delta[$0.position], distance: $0.metres) }
        merged.sort { $0.distance != $1.distance ? $0.distance < $1.distance : $0.storeId < $1.storeId }
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
        let current = snapshot.withLock { $0 }.value
        let perPage = max(1, query.limit)
        let skip = (max(1, page) - 1) * perPage
        let found = Self.nearest(in: current, to: point, query: query, k: skip + perPage)
        let inTree = current.tree.count(
            near: point, maxMetres: query.radius, accept: Self.accept(query, current.records, hidden: current.hidden),
            limit: reach)
        let total = min(reach, inTree + Self.deltaCandidates(current, to: point, query: query).count)
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

    public func nearestNow(to point: Coordinate, query: PlacesQuery) -> Result<[PlaceMatch], PlacesError>? {
        .success(index.nearest(to: point, query: query))
    }
}
