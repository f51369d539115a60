import EnrichmentCore
import Essentials
import TestSupport
import Testing

@Suite("Nearest POIs from the in-memory index")
struct SpatialIndexTests {
    @Test("nearest-k ids and distances equal a brute-force haversine scan exactly, worldwide", arguments: [1, 5, 20])
    func worldwide(k: Int) {
        var generator = SeededGenerator(seed: 42)
        let pois = awkwardWorld(generator: &generator)
        let index = PlacesIndex(pois: pois)
        var points = (0..<400).map { _ in
            Coordinate(
                latitude: Double.random(in: -90...90, using: &generator),
                longitude: Double.random(in: -180...180, using: &generator))
        }
        // Near and on the antimeridian, near and at the poles, and on the duplicated places themselves.
        points += (0..<60).map { i in
            Coordinate(
                latitude: Double.random(in: -20...20, using: &generator),
                longitude: i % 2 == 0
                    ? 180 - Double.random(in: 0...0.2, using: &generator)
                    : -180 + Double.random(in: 0...0.2, using: &generator))
        }
        points += [
            Coordinate(latitude: 90, longitude: 0), Coordinate(latitude: -90, longitude: 0),
            Coordinate(latitude: 89.99, longitude: -170), Coordinate(latitude: -89.99, longitude: 10),
            Coordinate(latitude: 10, longitude: 180), Coordinate(latitude: 10, longitude: -180),
        ]
        points += stride(from: 0, to: pois.count, by: 97).map { pois[$0].coordinate }
        for point in points {
            let query = PlacesQuery(limit: k)
            let got = index.nearest(to: point, query: query)
            let expected = bruteForce(pois, from: point, query: query)
            #expect(got.map(\.poi.storeId) == expected.map(\.poi.storeId), "ids differ at \(point)")
            #expect(got.map(\.distance) == expected.map(\.distance), "distances differ at \(point)")
        }
    }

    @Test("a query far from every place still finds the exact nearest, thousands of kilometres away")
    func farAway() {
        var generator = SeededGenerator(seed: 5)
        // Places only in Europe; queries in the South Pacific, Antarctica and the Arctic.
        let pois = randomPOIs(3_000, generator: &generator, around: Coordinate(latitude: 48, longitude: 10), spread: 8)
        let index = PlacesIndex(pois: pois)
        for point in [
            Coordinate(latitude: -40, longitude: -130), Coordinate(latitude: -85, longitude: 100),
            Coordinate(latitude: 80, longitude: -150), Coordinate(latitude: -48, longitude: -170),
        ] {
            let got = index.nearest(to: point, query: PlacesQuery(limit: 5))
            let expected = bruteForce(pois, from: point, query: PlacesQuery(limit: 5))
            #expect(got.first.map { $0.distance > 3_000_000 } == true)
            #expect(got.map(\.poi.storeId) == expected.map(\.poi.storeId))
            #expect(got.map(\.distance) == expected.map(\.distance))
        }
    }

    @Test("the same point twice under two ids: equal distance, ordered by store id")
    func ties() {
        let spot = Coordinate(latitude: 51.5, longitude: -0.12)
        let pois = [
            POI(storeId: "b", name: "", coordinate: spot), POI(storeId: "a", name: "", coordinate: spot),
            POI(storeId: "c", name: "", coordinate: spot),
        ]
        let index = PlacesIndex(pois: pois)
        let probe = Coordinate(latitude: 51.6, longitude: -0.1)
        #expect(index.nearest(to: probe, query: PlacesQuery(limit: 2)).map(\.poi.storeId) == ["a", "b"])
        #expect(Set(index.nearest(to: probe, query: PlacesQuery(limit: 3)).map(\.distance)).count == 1)
    }

    @Test("radius and Woosmap filters agree with the oracle, and a radius is inclusive to the metre")
    func filters() throws {
        var generator = SeededGenerator(seed: 99)
        let center = Coordinate(latitude: 40.75, longitude: -73.98)
        let pois = randomPOIs(2_000, generator: &generator, around: center, spread: 0.2).enumerated().map { i, poi in
            var poi = poi
            poi.userProperties = .object(["rating": .int(Int64(i % 5)), "name": .string(i % 2 == 0 ? "even" : "odd")])
            return poi
        }
        let index = PlacesIndex(pois: pois)
        let queries = [
            PlacesQuery(limit: 10, radius: 1_500),
            PlacesQuery(limit: 10, filter: try PlaceFilter.parse(#"type:"cafe""#)),
            PlacesQuery(limit: 10, filter: try PlaceFilter.parse(#"tag:"open""#)),
            PlacesQuery(limit: 10, radius: 3_000, filter: try PlaceFilter.parse(#"type:"cafe" AND tag:"open""#)),
            PlacesQuery(limit: 10, filter: try PlaceFilter.parse(#"user.rating:>=3 OR NOT user.name:"even""#)),
            PlacesQuery(limit: 10, radius: 1),
        ]
        for query in queries {
            for _ in 0..<30 {
                let point = Coordinate(
                    latitude: center.latitude + Double.random(in: -0.2...0.2, using: &generator),
                    longitude: center.longitude + Double.random(in: -0.2...0.2, using: &generator))
                let expected = bruteForce(pois, from: point, query: query)
                #expect(index.nearest(to: point, query: query).map(\.poi.storeId) == expected.map(\.poi.storeId))
                let total = pois.filter { poi in
                    query.accepts(poi) && (query.radius.map { point.distance(to: poi.coordinate) <= $0 } ?? true)
                }.count
                #expect(index.search(near: point, query: query, page: 1).pageCount == max(1, (total + 9) / 10))
            }
        }
        // A radius exactly equal to a place's distance includes it; a hair less does not.
        let point = Coordinate(latitude: 40.7, longitude: -74.0)
        let target = pois[7]
        let exact = point.distance(to: target.coordinate)
        let within = index.nearest(to: point, query: PlacesQuery(limit: 3_000, radius: exact)).map(\.poi.storeId)
        #expect(within.contains(target.storeId))
        #expect(
            !index.nearest(to: point, query: PlacesQuery(limit: 3_000, radius: exact.nextDown)).map(\.poi.storeId)
                .contains(target.storeId))
    }

    @Test("pages continue where the previous one stopped")
    func paging() {
        var generator = SeededGenerator(seed: 11)
        let pois = randomPOIs(500, generator: &generator, around: Coordinate(latitude: 0, longitude: 0), spread: 1)
        let index = PlacesIndex(pois: pois)
        let point = Coordinate(latitude: 0.1, longitude: 0.1)
        let all = bruteForce(pois, from: point, query: PlacesQuery(limit: 30)).map(\.poi.storeId)
        let pages = (1...3).map { index.search(near: point, query: PlacesQuery(limit: 10), page: $0) }
        #expect(pages.flatMap { $0.matches.map(\.poi.storeId) } == all)
        #expect(pages.map(\.pageCount) == [50, 50, 50])
        // Counting stops at the deepest reachable result, with and without a radius and a filter.
        #expect(index.search(near: point, query: PlacesQuery(limit: 10), page: 1, reach: 25).pageCount == 3)
        #expect(
            index.search(near: point, query: PlacesQuery(limit: 10, radius: 500_000), page: 1, reach: 25).pageCount == 3
        )
        let cafes = PlacesQuery(limit: 10, filter: PlaceFilter.anyOf(.type, ["cafe"]))
        #expect(index.search(near: point, query: cafes, page: 1, reach: 41).pageCount == 5)
        #expect(
            index.search(near: point, query: cafes, page: 1).pageCount == (pois.filter(cafes.accepts).count + 9) / 10)
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
