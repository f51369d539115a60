import EnrichmentCore
import Essentials
import Foundation
import TestSupport
import Testing

@Suite("Places index: incremental upserts and removals stay exact")
struct PlacesIndexChangesTests {
    @Test("after random upserts, replacements and removals the index answers as a brute-force scan")
    func randomChanges() {
        var generator = SeededGenerator(seed: 42)
        let centre = Coordinate(latitude: 48.85, longitude: 2.35)
        var truth: [String: POI] = [:]
        let base = randomPOIs(3_000, generator: &generator, around: centre, spread: 0.5)
        for poi in base { truth[poi.storeId] = poi }
        let index = PlacesIndex(pois: base)
        for round in 0..<40 {
            // New POIs, moved ones (same store id), and deletions, a few at a time (the delta path), with one
            // large batch that crosses the delta limit (the rebuild path).
            let size = round == 20 ? 1_500 : 7
            var batch = randomPOIs(size, generator: &generator, around: centre, spread: 0.5).map { poi in
                var moved = poi
                moved.storeId = "r\(round)-\(poi.storeId)"
                return moved
            }
            if let existing = truth.keys.sorted().randomElement(using: &generator) {
                var moved = truth[existing]!
                moved.coordinate.latitude += 0.001
                batch.append(moved)
            }
            index.upsert(batch)
            for poi in batch { truth[poi.storeId] = poi }
            let gone = Array(truth.keys.sorted().shuffled(using: &generator).prefix(3))
            #expect(index.remove(gone + ["never-there"]) == 3)
            for id in gone { truth[id] = nil }
            #expect(index.count == truth.count)
            let everything = Array(truth.values)
            for _ in 0..<5 {
                let point = Coordinate(
                    latitude: centre.latitude + Double.random(in: -0.5...0.5, using: &generator),
                    longitude: centre.longitude + Double.random(in: -0.5...0.5, using: &generator))
                for query in [PlacesQuery(limit: 5), PlacesQuery(limit: 3, radius: 5_000)] {
                    let got = index.nearest(to: point, query: query)
                    let want = bruteForce(everything, from: point, query: query)
                    #expect(got.map(\.poi.storeId) == want.map(\.poi.storeId), "round \(round)")
                    #expect(got.map(\.distance) == want.map(\.distance))
                }
            }
        }
        #expect(index.poi(storeId: "p1")?.storeId == truth["p1"]?.storeId)
    }

    @Test("details false leaves out a POI's contact and user properties, and nothing else")
    func withoutDetails() throws {
        let full = POI(
            storeId: "s1", name: "Café", coordinate: Coordinate(latitude: 48.85, longitude: 2.35),
            address: POI.Address(lines: ["1 rue X"], countryCode: "FR", city: "Paris", zipcode: "75001"),
            types: ["cafe"], tags: ["wifi"], contact: .object(["phone": .string("+33 1")]),
            userProperties: .object(["rank": .int(3)]))
        let index = PlacesIndex(pois: [full])
        var query = PlacesQuery(limit: 1)
        let detailed = try #require(index.nearest(to: full.coordinate, query: query).first?.poi)
        #expect(detailed == full)
        query.details = false
        let lean = try #require(index.nearest(to: full.coordinate, query: query).first?.poi)
        #expect(lean.contact == nil)
        #expect(lean.userProperties == nil)
        var expected = full
        expected.contact = nil
        expected.userProperties = nil
        #expect(lean == expected)
    }

    @Test("one POI into 144,000 goes to the delta: found at once, counted, and removable")
    func onePOIIntoMany() {
        var generator = SeededGenerator(seed: 7)
        let index = PlacesIndex(pois: randomPOIs(144_000, generator: &generator))
        var one = randomPOIs(1, generator: &generator)[0]
        one.storeId = "new"
        index.upsert([one])
        #expect(index.count == 144_001)
        #expect(index.nearest(to: one.coordinate, query: PlacesQuery(limit: 1)).first?.poi.storeId == "new")
        #expect(index.remove(["new", "p0"]) == 2)
        #expect(index.count == 143_999)
        #expect(index.poi(storeId: "p0") == nil)
    }
}
