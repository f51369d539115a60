import EnrichmentCore
import Synchronization
import Testing

/// A base store whose next lookup waits until released, to interleave a write with a cache fill.
final class GatedFixStore: FixStore {
    let inner = MemoryFixStore()
    let gate = Mutex<CheckedContinuation<Void, Never>?>(nil)
    let armed = Mutex(false)
    let reads = Mutex(0)

    func insert(_ fixes: [LocationFix]) async throws { try await inner.insert(fixes) }
    func deleteDevice(_ deviceId: String) async throws -> Int { try await inner.deleteDevice(deviceId) }
    func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
        try await inner.fixes(deviceId: deviceId, after: after, before: before, limit: limit)
    }
    func latestFix(deviceId: String) async throws -> LocationFix? {
        reads.withLock { $0 += 1 }
        let value = try await inner.latestFix(deviceId: deviceId)
        if armed.withLock({
            let was = $0
            $0 = false
            return was
        }) {
            await withCheckedContinuation { continuation in gate.withLock { $0 = continuation } }
        }
        return value
    }
    func release() {
        gate.withLock {
            $0?.resume()
            $0 = nil
        }
    }
    var isWaiting: Bool { gate.withLock { $0 != nil } }
}

func fix(_ device: String, _ time: Double, lat: Double = 0) -> LocationFix {
    LocationFix(deviceId: device, coordinate: Coordinate(latitude: lat, longitude: 0), fixTime: time, receivedAt: 0)
}

/// A base store that says, as SQLite does, which devices' newest fix an insert made (`PriorFixes.latest`): here
/// every device of the batch, and counts its reads.
final class ReportingFixStore: FixStore {
    let inner = MemoryFixStore()
    let reads = Mutex(0)
    /// Devices the store does not name as changed (as for a late fix).
    let silent: Set<String>
    /// When set, an insert waits here once stored, before it returns.
    let hold = Mutex<CheckedContinuation<Void, Never>?>(nil)
    let holding = Mutex(false)

    /// Set: only the first insert waits.
    init(silent: Set<String> = [], holding: Bool = false) {
        self.silent = silent
        self.holding.withLock { $0 = holding }
    }

    func insert(_ fixes: [LocationFix]) async throws { try await inner.insert(fixes) }
    func insertReportingPrior(_ fixes: [LocationFix]) async throws -> PriorFixes? {
        PriorFixes([:], latest: try await insertReportingLatest(fixes))
    }
    func insertReportingLatest(_ fixes: [LocationFix]) async throws -> [String: LocationFix] {
        try await inner.insert(fixes)
        var latest: [String: LocationFix] = [:]
        for fix in fixes where !silent.contains(fix.deviceId) { latest[fix.deviceId] = fix }
        if holding.withLock({
            let was = $0
            $0 = false
            return was
        }) {
            await withCheckedContinuation { continuation in hold.withLock { $0 = continuation } }
        }
        return latest
    }
    var isHolding: Bool { hold.withLock { $0 != nil } }
    func release() {
        holding.withLock { $0 = false }
        hold.withLock {
            $0?.resume()
            $0 = nil
        }
    }
    func deleteDevice(_ deviceId: String) async throws -> Int { try await inner.deleteDevice(deviceId) }
    func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
        try await inner.fixes(deviceId: deviceId, after: after, before: before, limit: limit)
    }
    func latestFix(deviceId: String) async throws -> LocationFix? {
        reads.withLock { $0 += 1 }
        return try await inner.latestFix(deviceId: deviceId)
    }
}

@Suite("Last-fix cache")
struct CachingFixStoreTests {
    @Test("a device the store says has a new newest fix is remembered at ingest: its first lookup reads nothing")
    func rememberedAtIngest() async throws {
        let base = ReportingFixStore(silent: ["late"])
        let cache = CachingFixStore(base: base)
        _ = try await cache.insertReportingPrior([fix("new", 100, lat: 1), fix("late", 50, lat: 2)])
        #expect(cache.cachedDevices == 1)
        #expect(try await cache.latestFix(deviceId: "new")?.coordinate.latitude == 1)
        #expect(base.reads.withLock { $0 } == 0)
        // The store did not name it: the cache cannot know its newest fix and reads it.
        #expect(try await cache.latestFix(deviceId: "late")?.coordinate.latitude == 2)
        #expect(base.reads.withLock { $0 } == 1)
        // The plain insert too; within the budget like any other entry.
        try await cache.insert([fix("plain", 7)])
        #expect(try await cache.latestFix(deviceId: "plain")?.fixTime == 7)
        #expect(base.reads.withLock { $0 } == 1)
        let small = CachingFixStore(base: ReportingFixStore(), capacity: 10)
        _ = try await small.insertReportingPrior((0..<100).map { fix("d\($0)", 1) })
        #expect(small.cachedDevices <= 10)
    }

    @Test("a device deleted after its fix was stored, before the insert returned, is not remembered")
    func deleteDuringInsert() async throws {
        let base = ReportingFixStore(holding: true)
        let cache = CachingFixStore(base: base)
        let insert = Task { _ = try await cache.insertReportingPrior([fix("gone", 100, lat: 1)]) }
        while !base.isHolding { try await Task.sleep(for: .milliseconds(1)) }
        // Stored; now deleted, in the store and the cache, before the insert updates the cache.
        #expect(try await cache.deleteDevice("gone") == 1)
        base.release()
        try await insert.value
        #expect(cache.cachedDevices == 0)
        #expect(try await cache.latestFix(deviceId: "gone") == nil)
    }

    @Test("an insert returning after a delete and a newer insert of the device does not bring the deleted fix back")
    func deleteThenInsertDuringInsert() async throws {
        let base = ReportingFixStore(holding: true)
        let cache = CachingFixStore(base: base)
        let first = Task { _ = try await cache.insertReportingPrior([fix("d", 100, lat: 1)]) }
        while !base.isHolding { try await Task.sleep(for: .milliseconds(1)) }
        #expect(try await cache.deleteDevice("d") == 1)
        _ = try await cache.insertReportingPrior([fix("d", 50, lat: 2)])
        base.release()
        try await first.value
        // The store holds only the fix of 50; so must every lookup.
        #expect(try await cache.latestFix(deviceId: "d")?.fixTime == 50)
        #expect(try await cache.latestFix(deviceId: "d")?.coordinate.latitude == 2)
    }

    @Test("concurrent inserts of other devices do not stop a device being remembered")
    func concurrentInsertsStillFill() async throws {
        let base = ReportingFixStore(holding: true)
        let cache = CachingFixStore(base: base)
        let devices = (0..<2000).map { "d\($0)" }
        let first = Task { _ = try await cache.insertReportingPrior(devices.map { fix($0, 10) }) }
        while !base.isHolding { try await Task.sleep(for: .milliseconds(1)) }
        // Another batch over the same stripes commits and updates the cache while the first is returning.
        _ = try await cache.insertReportingPrior(devices.map { fix("other-\($0)", 10) })
        base.release()
        try await first.value
        #expect(cache.cachedDevices == 4000)
        for device in devices { #expect(try await cache.latestFix(deviceId: device)?.fixTime == 10) }
        #expect(base.reads.withLock { $0 } == 0)
    }

    @Test("hits are served from memory and never regress to an older fix")
    func writeThrough() async throws {
        let base = GatedFixStore()
        let cache = CachingFixStore(base: base)
        try await cache.insert([fix("d", 100, lat: 1)])
        #expect(try await cache.latestFix(deviceId: "d")?.fixTime == 100)
        #expect(try await cache.latestFix(deviceId: "d")?.fixTime == 100)
        #expect(base.reads.withLock { $0 } == 1)
        try await cache.insert([fix("d", 50, lat: 5)])
        #expect(try await cache.latestFix(deviceId: "d")?.coordinate.latitude == 1)
        try await cache.insert([fix("d", 200, lat: 2), fix("d", 150, lat: 3)])
        #expect(try await cache.latestFix(deviceId: "d")?.coordinate.latitude == 2)
        #expect(base.reads.withLock { $0 } == 1)
    }

    @Test("'no fix' then the first insert, and delete forgets the device")
    func negativeAndDelete() async throws {
        let cache = CachingFixStore(base: MemoryFixStore())
        #expect(try await cache.latestFix(deviceId: "d") == nil)
        try await cache.insert([fix("d", 1)])
        #expect(try await cache.latestFix(deviceId: "d")?.fixTime == 1)
        #expect(try await cache.deleteDevice("d") == 1)
        #expect(try await cache.latestFix(deviceId: "d") == nil)
    }

    @Test("a write during a miss's store read is not overwritten by the older value")
    func raceWithWrite() async throws {
        let base = GatedFixStore()
        let cache = CachingFixStore(base: base)
        try await base.insert([fix("d", 100)])
        base.armed.withLock { $0 = true }
        let lookup = Task { try await cache.latestFix(deviceId: "d") }
        while !base.isWaiting { await Task.yield() }
        // The lookup has read fix 100 and is about to fill; a newer fix lands now.
        try await cache.insert([fix("d", 200)])
        base.release()
        #expect(try await lookup.value?.fixTime == 100)
        #expect(try await cache.latestFix(deviceId: "d")?.fixTime == 200)
    }

    @Test("the cache holds at most its capacity")
    func capacity() async throws {
        let cache = CachingFixStore(base: MemoryFixStore(), capacity: 10)
        for i in 0..<50 { try await cache.insert([fix("d\(i)", 1)]) }
        for i in 0..<50 { #expect(try await cache.latestFix(deviceId: "d\(i)")?.fixTime == 1) }
        #expect(cache.cachedDevices == 10)
    }

    @Test("lookups of devices that never reported a fix do not grow the cache")
    func unknownDevicesAreNotRemembered() async throws {
        let base = GatedFixStore()
        let cache = CachingFixStore(base: base)
        for i in 0..<10_000 { #expect(try await cache.latestFix(deviceId: "unknown-\(i)") == nil) }
        #expect(cache.cachedDevices == 0)
        // Each such lookup reads the store (the price of not remembering them).
        #expect(base.reads.withLock { $0 } == 10_000)
        try await cache.insert([fix("known", 5)])
        #expect(try await cache.latestFix(deviceId: "known")?.fixTime == 5)
        #expect(cache.cachedDevices == 1)
    }
}
