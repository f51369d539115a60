import EnrichmentCore
import Essentials
import Foundation
import LocationCore
import TestSupport
import Testing

/// The SDK's own fixtures (T/FIGMMCreatorTests.swift) and the checks of docs/LOCATION-RULES.md §2.
@Suite struct FIGMMTests {
    static let start = 1_514_808_000.0  // 2018-01-01 12:00 UTC

    static func visit(_ id: String, lng: Double, lat: Double, accuracy: Double, from: Double, to: Double) -> Visit {
        Visit(
            id: id, deviceId: "d", arrival: start + from, departure: start + to, latitude: lat, longitude: lng,
            horizontalAccuracy: accuracy, recordedAt: start + to)
    }

    static let visit1 = visit("visit1", lng: 1, lat: 2, accuracy: 15, from: 0, to: 7 * 3600)
    static let visit2 = visit("visit2", lng: 2, lat: 6, accuracy: 20, from: 24 * 3600, to: 24 * 3600 + 1800)
    static let visit3 = visit("visit3", lng: 2, lat: 6, accuracy: 20, from: 24 * 3600, to: 24 * 3600 + 1800)
    static let visit4 = visit("visit4", lng: 2, lat: 6.0001, accuracy: 20, from: 27 * 3600, to: 29 * 3600)
    static let home1 = visit("visit_on_home1", lng: 1, lat: 2, accuracy: 15, from: 0, to: 7 * 3600)
    static let home2 = visit("visit_on_home2", lng: 1.0001, lat: 2, accuracy: 20, from: 19 * 3600, to: 23 * 3600)

    /// Runs visits one by one through the device round trip.
    static func replay(_ visits: [Visit], classification: Bool = true) -> [ZoneOfInterest] {
        let counter = Counter()
        let figmm = FIGMM(classificationEnabled: classification, makeId: { _ in "z\(counter.next())" })
        var zois: [ZoneOfInterest] = []
        var stored: [String: Visit] = [:]
        for v in visits {
            stored[v.id] = v
            zois = figmm.process(v, zois: zois) { stored[$0] }
        }
        return zois
    }

    @Test func projectionMatchesTheSpecCheckAndGlibcTan() {
        #expect(SphericalMercator.lon2x(1) == 111319.49079327357)
        // glibc's correctly rounded tan (docs/LOCATION-RULES.md §0): one ulp above iOS's 222684.20850554318.
        #expect(SphericalMercator.lat2y(2) == 222684.20850554455)
        // Exact: glibc's atan, exp, tan and log give back the very double (an independent Python port agrees).
        #expect(SphericalMercator.y2lat(SphericalMercator.lat2y(48.8)) == 48.8)
    }

    @Test func chiSquaredGateAndPolygonLevel() {
        #expect(FIGMM.gate == 5.99146454710798)
        #expect(ZOIPolygon.chiSquared(0.7) == 2.407945608651872)
    }

    @Test func aFirstVisitCreatesAComponentWithTheSDKValues() throws {
        let zois = Self.replay([Self.visit1])
        let zoi = try #require(zois.first)
        #expect(zoi.inverse == [0.0011111111111111111, 0.0, 0.0, 0.0011111111111111111])
        #expect(zoi.det == 810000.0)
        #expect(zoi.prior == 1.0)
        #expect(zoi.accumulator == 1.0)
        #expect(zoi.age == 1.0)
        #expect(zoi.meanX == 111319.49079327357)
        #expect(zoi.startTime == Self.visit1.arrival)
        #expect(zoi.endTime == Self.visit1.departure)
        #expect(zoi.visitIds == ["visit1"])
        #expect(zoi.duration == 7 * 3600)
        #expect(zoi.wktPolygon == Self.wkt1)
    }

    @Test func aNewComponentsDetIsTheCLibrarysPowNotASquaredSquare() {
        // §2.5: det = pow(pow(σ, 2), 2). For σ = 72.8 and 18.2 glibc's pow(σ², 2) is one ulp above σ²·σ², the product
        // an optimised build used to compute instead (Sources/LocationCore/ZOI/LibcPow.swift).
        for (accuracy, det) in [(36.4, 28_088_304.025599994), (9.1, 109_719.93759999998)] {
            let zois = Self.replay([Self.visit("a", lng: 1, lat: 2, accuracy: accuracy, from: 0, to: 3600)])
            let sigma = 2 * accuracy
            let square = (sigma * sigma) * (sigma * sigma)
            #expect(zois.first?.det.bitPattern == det.bitPattern, "accuracy \(accuracy)")
            #expect(det.bitPattern == square.bitPattern.advanced(by: 1), "accuracy \(accuracy)")
        }
    }

    @Test func aFarVisitAddsASecondComponentAndHalvesThePriors() throws {
        let zois = Self.replay([Self.visit1, Self.visit2])
        #expect(zois.count == 2)
        #expect(zois[0].prior == 0.5)
        #expect(zois[0].wktPolygon == Self.wkt1)
        #expect(zois[1].inverse == [0.000625, 0.0, 0.0, 0.000625])
        #expect(zois[1].det == 2560000.0)
        #expect(zois[1].prior == 0.5)
        #expect(zois[1].meanX == 222638.98158654713)
        #expect(zois[1].wktPolygon == Self.wkt2)
    }

    @Test func anUpdateGivesTheSDKCovarianceBits() throws {
        let zois = Self.replay([Self.home1, Self.home2, Self.visit3, Self.visit4])
        #expect(zois.count == 2)
        let updated = try #require(zois.first { $0.visitIds.contains("visit4") })
        #expect(updated.visitIds == ["visit3", "visit4"])
        #expect(updated.meanX == 222638.98158654713)
        #expect(updated.inverse[0] == 0.0012500000000000002)
        #expect(updated.inverse[1] == 0.0)
        #expect(updated.inverse[2] == 0.0)
        #expect(updated.inverse[3] == 0.0012749591681068323)
        #expect(updated.det == 639056.2259361442)
        #expect(updated.prior == 0.5)
        #expect(updated.accumulator == 2.0)
        #expect(updated.age == 2.0)
    }

    @Test func weeklyDensityAccumulatesOnTheDeviceRoundTrip() throws {
        // docs/LOCATION-RULES.md §3: after four visits, visit_on_home1's bins hold 4.0 and visit_on_home2's 3.0.
        let zois = Self.replay([Self.home1, Self.home2, Self.visit3, Self.visit4])
        let home = try #require(zois.first { $0.visitIds.contains("visit_on_home1") })
        #expect(home.visitIds == ["visit_on_home1", "visit_on_home2"])
        for bin in 12...18 { #expect(home.weeklyDensity[bin] == 4.0, "bin \(bin)") }
        for bin in 31...34 { #expect(home.weeklyDensity[bin] == 3.0, "bin \(bin)") }
        let total: Double = home.weeklyDensity.reduce(0, +)
        #expect(total == 40.0)
    }

    @Test func withoutClassificationTheDensityStaysZero() {
        let zois = Self.replay([Self.home1, Self.home2], classification: false)
        #expect(zois.allSatisfy { $0.weeklyDensity.allSatisfy { $0 == 0 } })
        #expect(zois.allSatisfy { $0.period == ZOIPeriod.unqualified })
    }

    @Test func theGateIsInclusiveAtChiSquared95() {
        // A point at Mahalanobis q just inside the gate updates; just outside creates a component.
        let sigma = 2.0 * 10
        let base = Self.visit("a", lng: 0, lat: 0, accuracy: 10, from: 0, to: 3600)
        let inside = sqrt(FIGMM.gate) * sigma * 0.999
        let outside = sqrt(FIGMM.gate) * sigma * 1.001
        let dx1 = SphericalMercator.x2lon(inside)
        let dx2 = SphericalMercator.x2lon(outside)
        let near = Self.replay([base, Self.visit("b", lng: dx1, lat: 0, accuracy: 10, from: 7200, to: 9000)])
        let far = Self.replay([base, Self.visit("b", lng: dx2, lat: 0, accuracy: 10, from: 7200, to: 9000)])
        #expect(near.count == 1)
        #expect(near[0].age == 2)
        // Outside the gate: a new component, which here is the better one, so two ZOIs.
        #expect(far.count == 2)
        #expect(far[0].age == 1)
    }

    @Test func anOlderTighterZoneStealsAVisitAndTheNewComponentIsRemoved() throws {
        // Many visits make a heavy, tight zone; a wide visit just outside its gate creates a component, but
        // the old zone's f·prior is larger, so it wins the visit and the new component goes (§2.8 step 4).
        var visits: [Visit] = []
        for i in 0..<12 {
            visits.append(
                Self.visit(
                    "h\(i)", lng: 0, lat: 0, accuracy: 5, from: Double(i) * 86_400, to: Double(i) * 86_400 + 3600))
        }
        let before = Self.replay(visits)
        #expect(before.count == 1)
        let sigmaMetres = sqrt(1 / before[0].inverse[0])
        let x = SphericalMercator.x2lon(sigmaMetres * sqrt(FIGMM.gate) * 1.05)
        visits.append(Self.visit("wide", lng: x, lat: 0, accuracy: 49, from: 20 * 86_400, to: 20 * 86_400 + 3600))
        let after = Self.replay(visits)
        #expect(after.count == 1)
        #expect(after[0].visitIds.last == "wide")
        // The stolen visit does not move the zone's Gaussian.
        #expect(after[0].meanX == before[0].meanX)
        #expect(after[0].inverse == before[0].inverse)
        #expect(after[0].age == before[0].age)
    }

    @Test func polygonAxisSignCases() {
        // Diagonal with a < d points +y; non-diagonal with a < d points -y (docs/LOCATION-RULES.md §2.11 step 2).
        let diagonal = ZOIPolygon.wkt(meanX: 0, meanY: 0, inverse: [1.0 / 100, 0, 0, 1.0 / 400])
        let tilted = ZOIPolygon.wkt(meanX: 0, meanY: 0, inverse: [1.0 / 100, 1e-4, 1e-4, 1.0 / 400])
        func firstPoint(_ wkt: String) -> (Double, Double) {
            let pair = wkt.dropFirst("POLYGON((".count).split(separator: ",")[0].split(separator: " ")
            return (Double(pair[0])!, Double(pair[1])!)
        }
        // Covariance of the diagonal case is diag(100, 400): the major axis is y, the first point is +y.
        #expect(firstPoint(diagonal).1 > 0)
        #expect(firstPoint(diagonal).0 == 0)
        #expect(firstPoint(tilted).1 < 0)
        // a > d: the major axis is x, pointing +x.
        let wide = ZOIPolygon.wkt(meanX: 0, meanY: 0, inverse: [1.0 / 400, 0, 0, 1.0 / 100])
        #expect(firstPoint(wide).0 > 0)
        #expect(wide.hasSuffix(String(wide.dropFirst(9).split(separator: ",")[0]) + "))"))
        #expect(wide.split(separator: ",").count == 53)
    }

    @Test func retentionRemovesIdsAndKeepsTheGaussian() throws {
        let zois = Self.replay([Self.home1, Self.home2, Self.visit3, Self.visit4])
        let kept = FIGMM.removeVisits(["visit_on_home1", "visit3", "visit4"], from: zois, remaining: [Self.home2])
        #expect(kept.count == 1)
        let zoi = try #require(kept.first)
        #expect(zoi.visitIds == ["visit_on_home2"])
        #expect(zoi.duration == 4 * 3600)
        #expect(zoi.startTime == Self.home2.arrival)
        #expect(zoi.prior == 1.0)
        let original = try #require(zois.first { $0.id == zoi.id })
        #expect(zoi.meanX == original.meanX)
        #expect(zoi.inverse == original.inverse)
        #expect(zoi.weeklyDensity == original.weeklyDensity)
    }

    /// Tests/Fixtures/location/vectors: each NAME.visits.json with its recorded NAME.trajectory.txt and NAME.zois.json.
    static let vectorFolder = repositoryRoot.appendingPathComponent("Tests/Fixtures/location/vectors")
    static let vectorNames: [String] =
        ((try? FileManager.default.contentsOfDirectory(atPath: vectorFolder.path)) ?? [])
        .filter { $0.hasSuffix(".visits.json") }.map { String($0.dropLast(".visits.json".count)) }.sorted()

    /// FNV-1a, 64 bits, as `location-vectors` digests the zones after each visit.
    static func digest(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    @Test func theVectorFilesAreThere() {
        #expect(Self.vectorNames.contains("student-nyc-56d"))
        #expect(Self.vectorNames.count >= 5)
    }

    /// The ZOI vectors (docs/TESTING.md), bit for bit: the visits go one by one through VisitIntake as one fresh device;
    /// the zones' JSON after every visit (digested) and at the end must be the recorded bytes, and doubles are written
    /// shortest-round-trip, so equal bytes are equal bits. `location-vectors` runs the same check on a release build in
    /// CI (scripts/check-release-vectors.sh): this debug run alone cannot see what the optimiser changes.
    @Test(arguments: vectorNames) func aVectorFileReplaysBitForBit(_ name: String) throws {
        let data = try Data(contentsOf: Self.vectorFolder.appendingPathComponent("\(name).visits.json"))
        let items = try VisitIntake.parse(try JSONValue.decode(data))
        let intake = VisitIntake(settings: LocationSettings())
        var state = DeviceVisits()
        var trajectory: [String] = []
        for (index, item) in items.enumerated() {
            let (change, outcome) = intake.run([item], deviceId: "vectors", state: state, now: 0)
            try #require(outcome.rejected.isEmpty, "visits[\(index)] refused")
            state.visits += change.newVisits
            state.zois = change.zois
            let id = change.newVisits[0].id
            trajectory.append("\(index) \(id) \(state.zois.count) \(Self.digest(ZOIList(state.zois).jsonBytes))")
        }
        let expectedTrajectory = try String(
            contentsOf: Self.vectorFolder.appendingPathComponent("\(name).trajectory.txt"), encoding: .utf8
        ).split(separator: "\n").map(String.init)
        #expect(trajectory.count == expectedTrajectory.count)
        let firstDifference = zip(trajectory, expectedTrajectory).first { $0.0 != $0.1 }
        #expect(firstDifference == nil, "the zones differ from this visit on (got, expected)")
        let document =
            "{\"zois\":[\n" + state.zois.map { String(decoding: $0.jsonBytes, as: UTF8.self) }.joined(separator: ",\n")
            + "\n]}\n"
        let expected = try String(
            contentsOf: Self.vectorFolder.appendingPathComponent("\(name).zois.json"), encoding: .utf8)
        let lines = document.split(separator: "\n")
        let expectedLines = expected.split(separator: "\n")
        #expect(lines.count == expectedLines.count)
        for (line, expectedLine) in zip(lines, expectedLines) where line != expectedLine {
            Issue.record("zone differs:\n  got      \(line)\n  expected \(expectedLine)")
        }
    }

    static let wkt1 =
        "POLYGON((1.000000 2.000418,0.999948 2.000415,0.999897 2.000405,0.999847 2.000389,0.999800 2.000367,0.999755 2.000339,0.999715 2.000306,0.999679 2.000268,0.999648 2.000226,0.999623 2.000180,0.999603 2.000132,0.999590 2.000081,0.999583 2.000030,0.999582 1.999977,0.999589 1.999926,0.999601 1.999875,0.999620 1.999826,0.999644 1.999780,0.999675 1.999737,0.999710 1.999699,0.999750 1.999665,0.999793 1.999637,0.999840 1.999614,0.999890 1.999597,0.999941 1.999586,0.999993 1.999582,1.000045 1.999585,1.000097 1.999593,1.000147 1.999609,1.000194 1.999630,1.000239 1.999657,1.000280 1.999690,1.000316 1.999727,1.000348 1.999768,1.000374 1.999814,1.000395 1.999862,1.000409 1.999912,1.000417 1.999964,1.000418 2.000016,1.000413 2.000068,1.000401 2.000119,1.000383 2.000168,1.000359 2.000214,1.000330 2.000257,1.000295 2.000296,1.000256 2.000331,1.000213 2.000360,1.000166 2.000384,1.000117 2.000401,1.000066 2.000413,1.000014 2.000418,0.999962 2.000416,1.000000 2.000418))"
    static let wkt2 =
        "POLYGON((2.000000 6.000555,1.999930 6.000550,1.999862 6.000537,1.999796 6.000516,1.999733 6.000487,1.999674 6.000450,1.999620 6.000406,1.999572 6.000355,1.999531 6.000300,1.999497 6.000239,1.999471 6.000175,1.999453 6.000108,1.999444 6.000039,1.999443 5.999970,1.999451 5.999901,1.999468 5.999834,1.999493 5.999769,1.999526 5.999708,1.999566 5.999652,1.999613 5.999601,1.999666 5.999556,1.999725 5.999518,1.999787 5.999487,1.999853 5.999465,1.999921 5.999451,1.999991 5.999446,2.000060 5.999449,2.000129 5.999461,2.000196 5.999481,2.000259 5.999509,2.000319 5.999545,2.000373 5.999588,2.000422 5.999638,2.000464 5.999693,2.000499 5.999753,2.000526 5.999816,2.000545 5.999883,2.000555 5.999952,2.000557 6.000021,2.000550 6.000090,2.000535 6.000157,2.000511 6.000222,2.000479 6.000284,2.000440 6.000341,2.000393 6.000393,2.000341 6.000439,2.000283 6.000478,2.000221 6.000509,2.000156 6.000532,2.000088 6.000548,2.000019 6.000554,1.999949 6.000552,2.000000 6.000555))"
}

/// Numbers ids in creation order.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
