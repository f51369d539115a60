import Essentials
import Synchronization

/// What a device's visit pipeline reads: its stored visits (processing order) and its ZOIs (list order).
public struct DeviceVisits: Sendable, Equatable {
    public var visits: [Visit]
    public var zois: [ZoneOfInterest]

    public init(visits: [Visit] = [], zois: [ZoneOfInterest] = []) {
        self.visits = visits
        self.zois = zois
    }
}

/// What one run of the visit pipeline writes, all or nothing.
public struct DeviceVisitsChange: Sendable, Equatable {
    /// Visits to append, in processing order.
    public var newVisits: [Visit]
    /// The device's whole ZOI list after the run (replaces the stored one).
    public var zois: [ZoneOfInterest]
    public var events: [LocationEvent]

    public init(newVisits: [Visit] = [], zois: [ZoneOfInterest] = [], events: [LocationEvent] = []) {
        self.newVisits = newVisits
        self.zois = zois
        self.events = events
    }
}

/// Visits and ZOIs of devices. A device's read-compute-write is serialised: one run at a time per device.
public protocol VisitStore: Sendable {
    /// Reads the device's visits and ZOIs, runs `body`, and writes its change in one transaction, holding the
    /// device so no other run interleaves. Returns what `body` returned.
    func updateVisits<T: Sendable>(
        deviceId: String, _ body: @Sendable (DeviceVisits) throws -> (DeviceVisitsChange, T)
    ) async throws -> T
    /// The device's visits in processing order.
    func visits(deviceId: String) async throws -> [Visit]
    /// The device's ZOIs in list order.
    func zois(deviceId: String) async throws -> [ZoneOfInterest]
    /// True when the device has any visit, ZOI, fix-derived state or event.
    func knowsDevice(_ deviceId: String) async throws -> Bool
}

/// The global custom regions.
public protocol RegionStore: Sendable {
    /// Adds or replaces a region by id; returns true when it was new.
    func putRegion(_ region: Region) async throws -> Bool
    func regions() async throws -> [Region]
    /// Returns false when there was no such region.
    func deleteRegion(id: String) async throws -> Bool
}

/// What region evaluation remembers per device: its current POI regions and the last log of each region id
/// (§4.5 rule 3 looks it up by id, and logs outlive the regions, as in the SDK).
public struct DeviceRegionState: Sendable, Equatable {
    public struct Log: Sendable, Equatable {
        public var didEnter: Bool
        public var date: Double
        public init(didEnter: Bool, date: Double) {
            self.didEnter = didEnter
            self.date = date
        }
    }

    public var poiRegions: [Region]
    public var logs: [String: Log]
    /// The newest fix time evaluated (fixes at or before it were seen already).
    public var lastFixTime: Double?
    /// The visit detector reads fixes after this time: earlier ones can no longer be part of a new visit.
    public var detectAfter: Double?

    public init(
        poiRegions: [Region] = [], logs: [String: Log] = [:], lastFixTime: Double? = nil, detectAfter: Double? = nil
    ) {
        self.poiRegions = poiRegions
        self.logs = logs
        self.lastFixTime = lastFixTime
        self.detectAfter = detectAfter
    }

    /// The regions the device is inside now, by id.
    public var inside: Set<String> { Set(logs.filter { $0.value.didEnter }.keys) }

    /// Whether the state says something a store must keep: a region the device is inside, or an exit recent
    /// enough for the 5 s rule. A device far from every region has neither and costs no row.
    public var isWorthARow: Bool { !logs.isEmpty || !poiRegions.isEmpty }
}

/// What a region evaluation leaves to its store: a row only where the state says something (docs/SCALING.md,
/// "Disk per device").
public struct RegionStateWrites: Sendable {
    /// States to write (their times go with them).
    public var upserts: [(String, DeviceRegionState)] = []
    /// Devices whose row no longer says anything.
    public var deletes: [String] = []
    /// Devices whose times moved but nothing else: kept in memory (`lastFixTime`, `detectAfter`).
    public var times: [(String, lastFixTime: Double?, detectAfter: Double?)] = []

    /// `stored`: the rows read; `read`: what the evaluation started from (rows with the times kept in memory);
    /// `updated`: what it ended with; `eventDevices`: devices that raised an event.
    public init(
        stored: [String: DeviceRegionState], read: [String: DeviceRegionState],
        updated: [String: DeviceRegionState], eventDevices: Set<String>
    ) {
        for (id, state) in updated {
            let row = stored[id]
            if !state.isWorthARow {
                if row != nil { deletes.append(id) }
                if state != read[id] || row != nil { times.append((id, state.lastFixTime, state.detectAfter)) }
            } else if row == nil || eventDevices.contains(id) || state.logs != row?.logs
                || state.poiRegions != row?.poiRegions
            {
                upserts.append((id, state))
            } else if state != read[id] {
                times.append((id, state.lastFixTime, state.detectAfter))
            }
        }
    }
}

/// Region evaluation state and the events of devices.
public protocol RegionStateStore: Sendable {
    /// Reads the region state and the classified (home/work) ZOIs of each device, runs `body`, and writes the new
    /// states and the events in one transaction.
    func updateRegionStates<T: Sendable>(
        deviceIds: [String],
        _ body:
            @Sendable ([String: DeviceRegionState], [String: [ZoneOfInterest]]) throws -> (
                [String: DeviceRegionState], [LocationEvent], T
            )
    ) async throws -> T

    /// Reads the region state and the classified (home/work) ZOIs of each device, without writing or locking
    /// (what the enrichment's template needs; one trip to storage for the batch).
    func readRegionStates(deviceIds: [String]) async throws -> (
        states: [String: DeviceRegionState], zones: [String: [ZoneOfInterest]]
    )

    /// How many devices have a stored region state row (sizing; a device far from every region has none).
    func storedRegionStateCount() async throws -> Int
}

extension RegionStateStore {
    /// Through `updateRegionStates`, writing nothing (for stores whose writes cost no more than their reads).
    public func readRegionStates(deviceIds: [String]) async throws -> (
        states: [String: DeviceRegionState], zones: [String: [ZoneOfInterest]]
    ) {
        try await updateRegionStates(deviceIds: deviceIds) { states, zones in (states, [], (states, zones)) }
    }
}

/// The events of devices, in time order.
public protocol LocationEventStore: Sendable {
    /// Up to `limit` events of the device, oldest first, after `afterDate` when given.
    func events(deviceId: String, limit: Int) async throws -> [LocationEvent]
}

/// Retention (docs/LOCATION-RULES.md §5): what the daily job removes.
public protocol LocationRetention: Sendable {
    /// Removes visits recorded at or before `cutoff` (first taking their ids out of the ZOIs by `apply`),
    /// events dated at or before it, and returns how many visits and events went.
    func expire(
        recordedAtOrBefore cutoff: Double,
        _ apply: @Sendable ([ZoneOfInterest], _ expiring: Set<String>, _ remaining: [Visit]) -> [ZoneOfInterest]
    ) async throws -> (visits: Int, events: Int)
    /// Removes a device's visits, ZOIs, region state and events; returns how many rows went.
    func deleteLocationData(deviceId: String) async throws -> Int
}

/// Every location store together (one implementation per backend).
public typealias LocationStore = VisitStore & RegionStore & RegionStateStore & LocationEventStore & LocationRetention

/// The evaluation times (`lastFixTime`, `detectAfter`) of devices whose row was not written with them, kept in
/// memory up to a budget (the least recently used forgotten first); a store lays them over what it read.
public final class RegionStateTimes: Sendable {
    let memory: Mutex<BoundedMap<String, (lastFixTime: Double?, detectAfter: Double?)>>

    public init(capacity: Int) { memory = Mutex(BoundedMap(capacity: capacity)) }

    /// `stored` with the times kept for `ids` laid over it (the later of each).
    public func merged(_ stored: [String: DeviceRegionState], ids: [String]) -> [String: DeviceRegionState] {
        var states = stored
        memory.withLock { memory in
            for id in ids {
                guard let kept = memory[id] else { continue }
                var state = states[id] ?? DeviceRegionState()
                state.lastFixTime = Self.later(state.lastFixTime, kept.lastFixTime)
                state.detectAfter = Self.later(state.detectAfter, kept.detectAfter)
                states[id] = state
            }
        }
        return states
    }

    /// After `plan` was committed: written rows carry their times; the others' are kept here.
    public func apply(_ plan: RegionStateWrites) {
        memory.withLock { memory in
            for (id, _) in plan.upserts { memory[id] = nil }
            for (id, last, after) in plan.times { memory[id] = (last, after) }
        }
    }

    static func later(_ a: Double?, _ b: Double?) -> Double? {
        switch (a, b) {
        case (nil, _): b
        case (_, nil): a
        case (let a?, let b?): max(a, b)
        }
    }
}
