import EnrichmentCore
import EnrichmentRuntime
import Foundation
import LocationCore
import Synchronization
import Testing

/// A region-state store that answers from memory and counts its reads (the batch read must cost one).
private final class CountingRegionStates: RegionStateStore {
    let states: [String: DeviceRegionState]
    let reads = Mutex<[[String]]>([])

    init(_ states: [String: DeviceRegionState]) { self.states = states }

    func updateRegionStates<T: Sendable>(
        deviceIds: [String],
        _ body:
            @Sendable ([String: DeviceRegionState], [String: [ZoneOfInterest]]) throws -> (
                [String: DeviceRegionState], [LocationEvent], T
            )
    ) async throws -> T {
        try body(states.filter { deviceIds.contains($0.key) }, [:]).2
    }

    func readRegionStates(deviceIds: [String]) async throws -> (
        states: [String: DeviceRegionState], zones: [String: [ZoneOfInterest]]
    ) {
        reads.withLock { $0.append(deviceIds.sorted()) }
        return (states.filter { deviceIds.contains($0.key) }, [:])
    }

    func storedRegionStateCount() async throws -> Int { states.count }
}

@Suite("Device contexts read for a batch of deliveries")
struct DeviceContextsBatchTests {
    static let inside = DeviceRegionState(logs: ["custom_depot": .init(didEnter: true, date: 1)])
    static let left = DeviceRegionState(logs: ["custom_depot": .init(didEnter: false, date: 1)])

    @Test("the batch read gives what each device's read gives, in one read of the missing devices, then from cache")
    func sameAsOneByOne() async throws {
        let store = CountingRegionStates(["in": Self.inside, "out": Self.left])
        let batch = DeviceContexts(store: store, ttl: .seconds(60))
        let single = DeviceContexts(
            store: CountingRegionStates(["in": Self.inside, "out": Self.left]), ttl: .seconds(60))
        // "in" already cached, the rest missing.
        _ = try await batch.context(deviceId: "in")
        let found = try await batch.contexts(deviceIds: ["in", "out", "none", "out"])
        for id in ["in", "out", "none"] {
            #expect(found[id] == (try await single.context(deviceId: id)), "\(id)")
        }
        #expect(found["in"]?.region == "depot")
        #expect(found.keys.sorted() == ["in"])  // the others have nothing to say: left out, as `context` gives nil
        #expect(store.reads.withLock { $0 } == [["in"], ["none", "out", "out"]])
        // Read once: now from the cache.
        _ = try await batch.contexts(deviceIds: ["out", "none"])
        #expect(store.reads.withLock { $0.count } == 2)
    }

    @Test("prefetched contexts answer each device from the batch's read")
    func prefetched() async throws {
        let context = DeviceContext(regions: ["custom_depot"], region: "depot", zone: nil)
        let prefetched = PrefetchedContexts(["a": context])
        #expect(try await prefetched.context(deviceId: "a") == context)
        #expect(try await prefetched.context(deviceId: "b") == nil)
        #expect(try await prefetched.contexts(deviceIds: ["a", "b"]) == ["a": context])
    }
}
