import EnrichmentCore
import EnrichmentRuntime
import Logging
import Synchronization
import Testing

/// A POI store whose read for the index fails `failures` times, then waits until released.
final class GatedPOIStore: POIStore {
    let pois: [POI]
    let failures = Mutex(0)
    let released = Mutex(false)
    init(_ pois: [POI], failures: Int = 0) {
        self.pois = pois
        self.failures.withLock { $0 = failures }
    }
    func release() { released.withLock { $0 = true } }

    struct ReadFailed: Error, CustomStringConvertible {
        var description: String { "disk I/O error" }
    }

    func indexBuilder() async throws -> PlacesIndex.Builder {
        let fail = failures.withLock { count -> Bool in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        if fail { throw ReadFailed() }
        while !released.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        var builder = PlacesIndex.Builder()
        for poi in pois { builder.add(poi) }
        return builder
    }
    func upsert(_ pois: [POI]) async throws -> Int { pois.count }
    func upsert(chunks: POIChunks) async throws -> Int { 0 }
    func all() async throws -> [POI] { pois }
    func count() async throws -> Int { pois.count }
    func nearest(to point: Coordinate, query: PlacesQuery) async throws -> [PlaceMatch] { [] }
    func poi(storeId: String) async throws -> POI? { nil }
    func delete(storeIds: [String]) async throws -> Int { 0 }
}

@Suite("The places index loads in the background at start-up")
struct PlacesLoadingTests {
    static func poi(_ id: String, _ lat: Double) -> POI {
        POI(storeId: id, name: id, coordinate: Coordinate(latitude: lat, longitude: 2))
    }

    @Test("not loaded until the read is done; changes made meanwhile win over the read; a failed read is retried")
    func loadsInTheBackground() async throws {
        let store = GatedPOIStore([Self.poi("a", 48), Self.poi("b", 49), Self.poi("c", 50)], failures: 1)
        let index = PlacesIndex(awaitingLoad: ())
        let loading = PlacesLoading(loaded: false)
        let task = Task { await loading.run(store: store, index: index, logger: Logger(label: "test")) }
        #expect(!loading.isLoaded)
        #expect(await loading.wait(timeout: .milliseconds(50)) == false)
        // The first read failed: the problem says so while it is retried.
        #expect(loading.problem?.contains("disk I/O error") == true)
        // An import and a delete committed while the load reads the store.
        index.upsert([Self.poi("b", 10), Self.poi("d", 11)])
        index.remove(["c"])
        store.release()
        #expect(await loading.wait(timeout: .seconds(10)))
        await task.value
        #expect(loading.problem == nil)
        #expect(index.count == 3)
        #expect(index.poi(storeId: "b")?.coordinate.latitude == 10)
        #expect(index.poi(storeId: "c") == nil)
        let nearest = index.nearest(to: Coordinate(latitude: 48, longitude: 2), query: PlacesQuery(limit: 5))
        #expect(nearest.map(\.poi.storeId) == ["a", "d", "b"])
    }
}
