import Essentials
import Synchronization

/// Keeps each device's last fix in memory in front of a durable store, so enrichment does not wait on storage.
///
/// Writes go to the store first (durability is the store's job), then update or drop cache entries. A lookup that
/// missed fills the cache only if no write touched that device's stripe while it read the store; otherwise a
/// concurrent write could be overwritten by an older value. Meant for a single process owning its database
/// (the embedded SQLite mode); with several service instances sharing one database, use the store directly.
public final class CachingFixStore: FixStore {
    private struct State {
        var entries: BoundedMap<String, LocationFix?>
        var stripes = [UInt64](repeating: 0, count: 1024)
        /// Deletes per stripe: an insert that returns after a delete of its stripe does not fill or update it.
        var deletes = [UInt64](repeating: 0, count: 1024)
    }

    private let base: any FixStore
    private let state: Mutex<State>

    /// Wraps `base`, keeping at most `capacity` devices in memory (the least recently used are forgotten first
    /// and read from `base` again).
    public init(base: any FixStore, capacity: Int = 200_000) {
        self.base = base
        state = Mutex(State(entries: BoundedMap(capacity: capacity)))
    }

    /// Devices forgotten so far for room.
    public var evictions: Int { state.withLock { $0.entries.evictions } }

    private static func stripe(_ deviceId: String) -> Int {
        var hasher = Hasher()
        hasher.combine(deviceId)
        return Int(UInt(bitPattern: hasher.finalize()) % 1024)
    }

    public func insert(_ fixes: [LocationFix]) async throws {
        _ = try await insertReportingLatest(fixes)
    }

    public func insertReportingLatest(_ fixes: [LocationFix]) async throws -> [String: LocationFix] {
        let before = deleteCounts(of: fixes)
        let latest = try await base.insertReportingLatest(fixes)
        remember(fixes, latest: latest, before: before)
        return latest
    }

    public func insertReportingPrior(_ fixes: [LocationFix]) async throws -> PriorFixes? {
        let before = deleteCounts(of: fixes)
        let prior = try await base.insertReportingPrior(fixes)
        remember(fixes, latest: prior?.latest ?? [:], before: before)
        return prior
    }

    /// The deletes so far of each stripe the fixes' devices fall in, taken before they are stored.
    private func deleteCounts(of fixes: [LocationFix]) -> [Int: UInt64] {
        var stripes: Set<Int> = []
        fixes.forEachDeviceRun { device, _ in stripes.insert(Self.stripe(device)) }
        return state.withLock { state in
            Dictionary(uniqueKeysWithValues: stripes.map { ($0, state.deletes[$0]) })
        }
    }

    /// Updates the cache after `fixes` were stored: a device it holds gets its newer fix; one it does not hold is
    /// added when the store said the fix is now its newest (`latest`), so a device's first enrichment after it
    /// reported needs no read. A device whose stripe saw a delete since `before` is dropped instead (a delete that
    /// came after this insert must not see the fix come back; the next lookup reads the store). Other inserts do
    /// not stop a fill: the fix times order them. Within `capacity`, like any other entry.
    private func remember(_ fixes: [LocationFix], latest: [String: LocationFix], before: [Int: UInt64]) {
        // Of fixes with the same time the last one stands, as in the store.
        let newest = fixes.newestByDevice()
        state.withLock { state in
            let untouched = Set(before.compactMap { state.deletes[$0.key] == $0.value ? $0.key : nil })
            for (device, sent) in newest {
                let stripe = Self.stripe(device)
                state.stripes[stripe] &+= 1
                guard untouched.contains(stripe) else {
                    state.entries.removeValue(forKey: device)
                    continue
                }
                let fix = latest[device] ?? sent
                switch state.entries[device] {
                case .some(.some(let cached)):
                    // Same fix time: the store replaced the row, so the new one is current too, unless it is the
                    // same fix sent again, which the store leaves as it is (its first arrival).
                    var again = fix
                    again.receivedAt = cached.receivedAt
                    if fix.fixTime > cached.fixTime || (fix.fixTime == cached.fixTime && again != cached) {
                        state.entries[device] = .some(fix)
                    }
                case .some(.none):
                    state.entries[device] = .some(fix)
                case .none:
                    if let stored = latest[device] { state.entries[device] = .some(stored) }
                }
            }
        }
    }

    /// What `latestFix` would answer without reading the store, counting as a use as it does; nil on a miss.
    public func cachedLatestFix(deviceId: String) -> LocationFix?? {
        state.withLock { $0.entries[deviceId] }
    }

    public func latestFix(deviceId: String) async throws -> LocationFix? {
        let stripe = Self.stripe(deviceId)
        let (cached, generation): (LocationFix??, UInt64) = state.withLock {
            ($0.entries[deviceId], $0.stripes[stripe])
        }
        if let cached { return cached }
        let fix = try await base.latestFix(deviceId: deviceId)
        // Only devices that have a fix are remembered: ids that were never reported (anyone can send them) must
        // not grow memory. Such lookups go to the store each time.
        guard let fix else { return nil }
        state.withLock { state in
            guard state.stripes[stripe] == generation else { return }
            state.entries[deviceId] = .some(fix)
        }
        return fix
    }

    /// Straight from the store, which keeps the last-fix index.
    public func lastPositions(
        inCells ranges: [ClosedRange<Int64>], fixedSince oldest: Double, accuracyAtMost maxAccuracy: Double
    ) async throws -> [DevicePosition] {
        try await base.lastPositions(inCells: ranges, fixedSince: oldest, accuracyAtMost: maxAccuracy)
    }

    /// A batch (a push's deliveries, 500 devices at a time) reads through the cache: what is kept is used, what
    /// the store gives is not kept. A push to a million devices then neither pushes out the devices enriched
    /// often nor grows memory with its size (issue 48).
    public func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix] {
        var found: [String: LocationFix] = Dictionary(minimumCapacity: deviceIds.count)
        var missing: [String] = []
        state.withLock { state in
            for id in Set(deviceIds) {
                switch state.entries.peek(id) {
                case .some(.some(let fix)): found[id] = fix
                case .some(.none): break
                case .none: missing.append(id)
                }
            }
        }
        guard !missing.isEmpty else { return found }
        for (id, fix) in try await base.latestFixes(deviceIds: missing) { found[id] = fix }
        return found
    }

    public func expireFixes(takenAtOrBefore cutoff: Double) async throws -> Int {
        // A cached last fix this old is past any fix age the enricher accepts; the cache needs no change.
        try await base.expireFixes(takenAtOrBefore: cutoff)
    }

    public func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
        try await base.fixes(deviceId: deviceId, after: after, before: before, limit: limit)
    }

    public func fix(deviceId: String, before: Double) async throws -> LocationFix? {
        try await base.fix(deviceId: deviceId, before: before)
    }

    public func deleteDevice(_ deviceId: String) async throws -> Int {
        let removed = try await base.deleteDevice(deviceId)
        state.withLock { state in
            let stripe = Self.stripe(deviceId)
            state.stripes[stripe] &+= 1
            state.deletes[stripe] &+= 1
            state.entries.removeValue(forKey: deviceId)
        }
        return removed
    }

    /// Devices currently held in memory.
    public var cachedDevices: Int { state.withLock { $0.entries.count } }
}
