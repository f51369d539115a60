public import EnrichmentCore
import Essentials
public import LocationCore
import Synchronization

/// The device contexts (regions inside, home/work zone) the enricher offers its template: computed as regions
/// are evaluated and kept in memory; read from the store on a miss or after `ttl` (other nodes may have
/// evaluated the device since).
public final class DeviceContexts: DeviceContextProvider, Sendable {
    let store: any RegionStateStore
    let ttl: Duration
    let cache: Mutex<BoundedMap<String, (context: DeviceContext, at: ContinuousClock.Instant)>>
    /// Misses of concurrent enrichments, read together (one query per batch, no lock: a read only).
    let loader: CoalescingLoader<DeviceContext>

    /// `capacity`: the devices whose context is kept (least recently used forgotten first).
    public init(store: any RegionStateStore, ttl: Duration, capacity: Int = 200_000) {
        self.store = store
        self.ttl = ttl
        cache = Mutex(BoundedMap(capacity: capacity))
        loader = CoalescingLoader(maximumBatches: 8) { ids in try await Self.read(ids, from: store) }
    }

    /// The contexts of `ids` in one read; a device with nothing evaluated yet gets an empty one (remembered too, so
    /// enrichment reads it once).
    static func read(_ ids: [String], from store: any RegionStateStore) async throws -> [String: DeviceContext] {
        let (states, zones) = try await store.readRegionStates(deviceIds: ids)
        var contexts: [String: DeviceContext] = [:]
        for id in ids {
            contexts[id] = states[id].map { Self.context($0, zones: zones[id] ?? []) } ?? DeviceContext()
        }
        return contexts
    }

    func remember(_ contexts: [String: DeviceContext]) {
        let now = ContinuousClock.now
        cache.withLock { cache in
            for (device, context) in contexts { cache[device] = (context, now) }
        }
    }

    func forget(_ deviceId: String) { cache.withLock { _ = $0.removeValue(forKey: deviceId) } }

    func forgetAll() { cache.withLock { $0.removeAll() } }

    /// The device's context from its region state and classified zones.
    static func context(_ state: DeviceRegionState, zones: [ZoneOfInterest]) -> DeviceContext {
        let inside = state.inside
        // Custom regions as their app knows them (`custom_<id>`, without the app: AppNamespace).
        let ids = inside.map(AppNamespace.shownRegion).sorted { a, b in
            let ra = a.hasPrefix("custom_") ? 0 : (a.hasPrefix("poi_") ? 1 : 2)
            let rb = b.hasPrefix("custom_") ? 0 : (b.hasPrefix("poi_") ? 1 : 2)
            return ra != rb ? ra < rb : a < b
        }
        var name: String?
        if let first = ids.first(where: { $0.hasPrefix("custom_") }) {
            name = String(first.dropFirst("custom_".count))
        } else if let poi = state.poiRegions.first(where: { inside.contains($0.id) }) {
            name = poi.extra["name"]?.stringValue
        }
        var zone: String?
        for zoi in zones where inside.contains("zoi_\(zoi.id)") {
            if zoi.period == ZOIPeriod.home {
                zone = "home"
            } else if zoi.period == ZOIPeriod.work, zone == nil {
                zone = "work"
            }
        }
        return DeviceContext(regions: ids, region: name, zone: zone)
    }

    /// The known contexts of a batch's devices: the cached ones under one lock, the rest in one read.
    public func contexts(deviceIds: [String]) async throws -> [String: DeviceContext] {
        let (ttl, now) = (ttl, ContinuousClock.now)
        var found: [String: DeviceContext] = Dictionary(minimumCapacity: deviceIds.count)
        var missing: [String] = []
        cache.withLock { cache in
            for id in deviceIds {
                if let cached = cache[id], now - cached.at < ttl {
                    if !cached.context.isEmpty { found[id] = cached.context }
                } else {
                    missing.append(id)
                }
            }
        }
        guard !missing.isEmpty else { return found }
        let read = try await Self.read(missing, from: store)
        for (id, context) in read where !context.isEmpty { found[id] = context }
        remember(read)
        return found
    }

    /// A context cached within `ttl`, as `context` would answer it; nil when it would read the store.
    public func cachedContext(deviceId: String) -> DeviceContext?? {
        guard let cached = cache.withLock({ $0[deviceId] }), ContinuousClock.now - cached.at < ttl else { return nil }
        return .some(cached.context.isEmpty ? nil : cached.context)
    }

    public func context(deviceId: String) async throws -> DeviceContext? {
        let ttl = ttl
        if let cached = cache.withLock({ $0[deviceId] }), ContinuousClock.now - cached.at < ttl {
            return cached.context.isEmpty ? nil : cached.context
        }
        let context = try await loader.load(deviceId) ?? DeviceContext()
        remember([deviceId: context])
        return context.isEmpty ? nil : context
    }
}
