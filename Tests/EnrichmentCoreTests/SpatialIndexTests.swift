import EnrichmentCore
import Testing
import TestSupport

@Suite("Nearest POIs from the in-memory index")
struct SpatialIndexTests {
    @Test("nearest-k matches a brute-force haversine search, worldwide", arguments: [1, 5, 20])
    func worldwide(k: Int) {
        var generator = SeededGenerator(seed: 42)
        let pois = randomPOIs(1_500, generator: &generator)
        let index = PlacesIndex(pois: pois)
        for _ in 0..<80 {
            let point = Coordinate(latitude: Double.random(in: -90...90, using: &generator),
                                   longitude: Double.random(in: -180...180, using: &generator))
            let query = PlacesQuery(limit: k)
            let got = index.nearest(to: point, query: query)
            let expected = bruteForce(pois, from: point, query: query)
            #expect(got.map(\.distance).count == k)
            for (a, b) in zip(got, expected) {
                #expect(abs(a.distance - b.distance) < 1e-3, "distance mismatch at \(point)")
            }
            #expect(got.map(\.distance) == got.map(\.distance).sorted(), "results must be nearest first")
        }
    }

    @Test("dense city cluster, across the antimeridian and near a pole")
    func edgeRegions() {
        var generator = SeededGenerator(seed: 7)
        for center in [Coordinate(latitude: 48.85, longitude: 2.35), Coordinate(latitude: 0, longitude: 179.99),
                       Coordinate(latitude: 89.9, longitude: 0)] {
            let pois = randomPOIs(1_000, generator: &generator, around: center, spread: 0.5)
            let index = PlacesIndex(pois: pois)
            for _ in 0..<50 {
                let point = Coordinate(latitude: max(-90, min(90, center.latitude + Double.random(in: -0.6...0.6, using: &generator))),
                                       longitude: center.longitude + Double.random(in: -0.6...0.6, using: &generator)).wrapped
                let query = PlacesQuery(limit: 5)
                let got = index.nearest(to: point, query: query).map(\.poi.storeId)
                let expected = bruteForce(pois, from: point, query: query).map(\.poi.storeId)
                #expect(got == expected)
            }
        }
    }

    @Test("radius and type/tag filters agree with the oracle")
    func filters() {
        var generator = SeededGenerator(seed: 99)
        let center = Coordinate(latitude: 40.75, longitude: -73.98)
        let pois = randomPOIs(2_000, generator: &generator, around: center, spread: 0.2)
        let index = PlacesIndex(pois: pois)
        let queries = [
            PlacesQuery(limit: 10, radius: 1_500),
            PlacesQuery(limit: 10, types: ["cafe"]),
            PlacesQuery(limit: 10, tags: ["open"]),
            PlacesQuery(limit: 10, radius: 3_000, types: ["cafe"], tags: ["open"]),
            PlacesQuery(limit: 10, radius: 1),
        ]
        for query in queries {
            for _ in 0..<30 {
                let point = Coordinate(latitude: center.latitude + Double.random(in: -0.2...0.2, using: &generator),
                                       longitude: center.longitude + Double.random(in: -0.2...0.2, using: &generator))
                #expect(index.nearest(to: point, query: query).map(\.poi.storeId)
                    == bruteForce(pois, from: point, query: query).map(\.poi.storeId))
            }
        }
    }

    @Test("upsert replaces a POI by store id and moves it in the index")
    func upsertMoves() {
        let a = POI(storeId: "a", name: "A", coordinate: Coordinate(latitude: 10, longitude: 10))
        let b = POI(storeId: "b", name: "B", coordinate: Coordinate(latitude: 20, longitude: 20))
        let index = PlacesIndex(pois: [a, b])
        let probe = Coordinate(latitude: 20, longitude: 20)
        #expect(index.nearest(to: probe, query: PlacesQuery(limit: 1)).first?.poi.storeId == "b")
        index.upsert([POI(storeId: "a", name: "A moved", coordinate: probe)])
        #expect(index.count == 2)
        let first = index.nearest(to: probe, query: PlacesQuery(limit: 2))
        #expect(first.map(\.poi.name).contains("A moved"))
        #expect(first.first?.distance == 0)
    }

    @Test("an empty index answers with nothing")
    func empty() {
        #expect(PlacesIndex().nearest(to: Coordinate(latitude: 0, longitude: 0), query: PlacesQuery()).isEmpty)
    }
}

extension Coordinate {
    /// Longitude wrapped into [-180, 180].
    var wrapped: Coordinate {
        var lng = longitude
        while lng > 180 { lng -= 360 }
        while lng < -180 { lng += 360 }
        return Coordinate(latitude: latitude, longitude: lng)
    }
}
