import EnrichmentCore
import Essentials
import Foundation
import LocationCore
import TestSupport
import Testing

/// Polygon regions (issue 47): what `POST /v1/regions` accepts, the inside rule against a brute-force oracle, the
/// accuracy at an edge, the stored document and enter/exit through the evaluator.
@Suite struct RegionPolygonTests {
    static let radii = 1.0...100_000.0

    static func body(_ polygon: String, id: String = "area", extra: String = "") -> JSONValue {
        // Parsed by the project's reader, as the route reads it.
        (try? JSONValue.decode(Data(#"{"id":"\#(id)","polygon":\#(polygon)\#(extra)}"#.utf8))) ?? .null
    }

    static func region(_ ring: [PolygonOracle.Point], id: String = "area") throws -> Region {
        try Region.custom(from: body(PolygonOracle.json(ring), id: id), radius: radii)
    }

    static func fix(_ point: PolygonOracle.Point, accuracy: Double = 0, at time: Double = 0) -> LocationFix {
        LocationFix(
            deviceId: "d", coordinate: Coordinate(latitude: point.latitude, longitude: point.longitude),
            fixTime: time, horizontalAccuracy: accuracy, receivedAt: time)
    }

    /// The field and description of the problem a body is refused with (nil: accepted).
    static func problem(_ document: JSONValue) -> RegionProblem? {
        do {
            _ = try Region.custom(from: document, radius: radii)
            return nil
        } catch {
            return error
        }
    }

    @Test("inside matches a winding-number oracle on 3,000 seeded points per polygon (convex, star, notched)")
    func insideMatchesOracle() throws {
        var generator = SeededGenerator(seed: 47)
        for (name, ring) in [
            ("convex", PolygonOracle.convex), ("star", PolygonOracle.star), ("notched", PolygonOracle.notched),
        ] {
            let region = try Self.region(ring)
            #expect(region.shape == "polygon")
            var (inside, outside, disagreements) = (0, 0, [String]())
            for _ in 0..<3_000 {
                let point = PolygonOracle.point(around: ring, using: &generator)
                let want = PolygonOracle.contains(ring, point)
                if want { inside += 1 } else { outside += 1 }
                if region.shapeHolds(Self.fix(point)) != want { disagreements.append("\(point)") }
            }
            #expect(disagreements.isEmpty, "\(name): \(disagreements.prefix(5))")
            // Both answers occur often: a rule that always says one thing fails above.
            #expect(inside > 300 && outside > 300, "\(name): \(inside) inside, \(outside) outside")
        }
        // The notch lies inside the circle the region shows, and outside the polygon.
        let notched = try Self.region(PolygonOracle.notched)
        let notch = Coordinate(latitude: PolygonOracle.inNotch.latitude, longitude: PolygonOracle.inNotch.longitude)
        #expect(notched.centre.distance(to: notch) < notched.radius)
        #expect(!notched.shapeHolds(Self.fix(PolygonOracle.inNotch)))
        #expect(notched.shapeHolds(Self.fix(PolygonOracle.inNotchedBar)))
    }

    @Test("the fix's accuracy reaches across an edge as it does for a circle: distance to the edge < accuracy")
    func accuracyAtTheEdge() throws {
        let region = try Self.region(PolygonOracle.notched)
        // The east edge runs along longitude 2.366; a point 50 m east of it, by the metres of a degree of longitude
        // at that latitude on the project's sphere.
        let latitude = 48.850
        let metresPerDegree = 6_371_008.8 * Double.pi / 180 * cos(latitude * Double.pi / 180)
        let east = (latitude: latitude, longitude: 2.366 + 50 / metresPerDegree)
        #expect(!region.shapeHolds(Self.fix(east)))
        #expect(!region.shapeHolds(Self.fix(east, accuracy: 49)))
        #expect(region.shapeHolds(Self.fix(east, accuracy: 51)))
        // Within the notch, 100 m from its walls on each side (0.002° of longitude is about 146 m here).
        #expect(!region.shapeHolds(Self.fix(PolygonOracle.inNotch, accuracy: 100)))
        #expect(region.shapeHolds(Self.fix(PolygonOracle.inNotch, accuracy: 150)))
    }

    @Test("bad polygons are refused with the field at fault, why, and what is allowed")
    func validation() throws {
        func ring(_ points: [(Double, Double)]) -> String {
            PolygonOracle.json(points.map { (latitude: $0.0, longitude: $0.1) })
        }
        let square = [(48.0, 2.0), (48.0, 2.01), (48.01, 2.01), (48.01, 2.0)]
        let cases: [(String, JSONValue, String, String)] = [
            ("two vertices", Self.body(ring(Array(square.prefix(2)))), "polygon", "3 to 1000 distinct vertices"),
            ("a repeated vertex", Self.body(ring(square + [(48.0, 2.01)])), "polygon[4]", "repeats polygon[1]"),
            ("a closed ring", Self.body(ring(square + [(48.0, 2.0)])), "polygon[4]", "the ring is open"),
            (
                "a bow-tie", Self.body(ring([(48.0, 2.0), (48.01, 2.01), (48.01, 2.0), (48.0, 2.01)])), "polygon",
                "cross"
            ),
            ("a spike", Self.body(ring([(48.0, 2.0), (48.0, 2.02), (48.0, 2.01), (48.01, 2.01)])), "polygon", "cross"),
            ("collinear", Self.body(ring([(48.0, 2.0), (48.0, 2.01), (48.0, 2.02)])), "polygon", "cross"),
            (
                "the antimeridian", Self.body(ring([(10.0, 179.9), (10.0, -179.9), (10.1, -179.9), (10.1, 179.9)])),
                "polygon", "antimeridian"
            ),
            ("too large", Self.body(ring([(48.0, 2.0), (48.0, 5.0), (49.0, 5.0)])), "polygon", "at most 100000 m"),
            (
                "a circle too", Self.body(ring(square), extra: #","latitude":48,"longitude":2,"radius":10"#),
                "polygon", "never both"
            ),
            ("not an array", Self.body(#"{"latitude":48}"#), "polygon", "an array of 3 to 1000"),
            (
                "a latitude of 91", Self.body(ring([(48.0, 2.0), (91.0, 2.0), (48.01, 2.01)])), "polygon[1].latitude",
                "[-90, 90]"
            ),
            (
                "a string longitude",
                Self.body(
                    #"[{"latitude":48,"longitude":"2"},{"latitude":48,"longitude":2.1},{"latitude":48.1,"longitude":2}]"#
                ),
                "polygon[0].longitude", "must be a number"
            ),
            (
                "a vertex's altitude",
                Self.body(
                    #"[{"latitude":48,"longitude":2,"altitude":3},{"latitude":48,"longitude":2.1},{"latitude":48.1,"longitude":2}]"#
                ),
                "polygon[0].altitude", "not a vertex field"
            ),
        ]
        for (name, document, field, words) in cases {
            let problem = try #require(Self.problem(document), "\(name) was accepted")
            #expect(problem.field == field, "\(name): \(problem)")
            #expect(problem.description.contains(words), "\(name): \(problem.description)")
        }
    }

    @Test("1,000 vertices are accepted, 1,001 are not")
    func vertexLimit() throws {
        func regular(_ count: Int) -> [PolygonOracle.Point] {
            (0..<count).map { index in
                let angle = 2 * Double.pi * Double(index) / Double(count)
                return (48.85 + 0.01 * sin(angle), 2.35 + 0.01 * cos(angle))
            }
        }
        let accepted = try Self.region(regular(1_000))
        #expect(accepted.polygon?.vertices.count == 1_000)
        let refused = try #require(Self.problem(Self.body(PolygonOracle.json(regular(1_001)))))
        #expect(refused.field == "polygon")
        #expect(refused.description.contains("1001 vertices; at most 1000"))
    }

    @Test("the JSON shape names the polygon; a circle stays a circle")
    func jsonShape() throws {
        let region = try Self.region(PolygonOracle.convex)
        let json = try JSONValue.decode(Data(region.jsonBytes))
        #expect(json["shape"] == .string("polygon"))
        #expect(json["id"] == .string("custom_area"))
        guard case .array(let vertices)? = json["polygon"] else {
            Issue.record("no polygon in \(json)")
            return
        }
        #expect(vertices.count == 6)
        #expect(vertices[2]["latitude"]?.lenientDouble == 48.850)
        #expect(vertices[2]["longitude"]?.lenientDouble == 2.308)
        // The circle it shows: the middle of its box, and its farthest vertex (0.008° of longitude = 8 × 73.2 m).
        #expect(abs((json["latitude"]?.lenientDouble ?? 0) - 48.850) < 1e-12)
        #expect(abs((json["longitude"]?.lenientDouble ?? 0) - 2.300) < 1e-12)
        #expect(abs((json["radius"]?.lenientDouble ?? 0) - 585.6) < 0.5)
        let circle = Region(id: "custom_c", latitude: 48, longitude: 2, radius: 100)
        let circleJSON = try JSONValue.decode(Data(circle.jsonBytes))
        #expect(circleJSON["shape"] == .string("circle"))
        #expect(circleJSON["polygon"] == nil)
    }

    @Test("the stored document keeps the polygon; one stored before polygons reads back as its circle")
    func storedDocument() throws {
        let region = try Self.region(PolygonOracle.star)
        #expect(try LocationCodec.region(LocationCodec.encode(region)) == region)
        let old = try LocationCodec.region(
            #"{"id":"custom_old","latitude":48,"longitude":2,"radius":100,"policy":"either"}"#)
        #expect(old.polygon == nil)
        #expect(old.shape == "circle")
        let metres = 6_371_008.8 * Double.pi / 180
        #expect(old.shapeHolds(Self.fix((48 + 99 / metres, 2))))
        #expect(!old.shapeHolds(Self.fix((48 + 101 / metres, 2))))
    }

    @Test("enter and exit follow the polygon through the evaluator: into the notch is out")
    func evaluatorEvents() throws {
        let region = try Self.region(PolygonOracle.notched)
        let evaluator = RegionEvaluator(settings: LocationSettings())
        var state = DeviceRegionState()
        let path: [PolygonOracle.Point] = [
            PolygonOracle.inNotch, PolygonOracle.inNotchedBar, PolygonOracle.inNotch, (48.850, 2.355),
        ]
        let events = evaluator.evaluate(
            path.enumerated().map { .init(fix: Self.fix($1, at: Double($0) * 10)) }, deviceId: "d", state: &state,
            zones: [], custom: { _ in [region] }, customById: { $0 == region.id ? region : nil }, pois: nil)
        #expect(events.map(\.type) == ["region_enter", "region_exit", "region_enter"])
        #expect(events.map(\.date) == [10, 20, 30])
        #expect(events.first?.fields["shape"] == .string("polygon"))
        #expect(events.first?.fields["region_id"] == .string("custom_area"))
    }
}
