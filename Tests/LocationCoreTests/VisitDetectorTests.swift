import EnrichmentCore
import LocationCore
import Testing

/// The fix-based visit detector of docs/LOCATION-RULES.md §1.3 (ours).
@Suite struct VisitDetectorTests {
    let detector = VisitDetector(parameters: VisitDetector.Parameters())

    func fix(_ t: Double, lat: Double = 48.0, lng: Double = 2.0, accuracy: Double? = 10, context: String? = nil)
        -> LocationFix
    {
        LocationFix(
            deviceId: "d", coordinate: Coordinate(latitude: lat, longitude: lng), fixTime: t,
            horizontalAccuracy: accuracy, context: context, receivedAt: t)
    }

    @Test func aStayOfTenMinutesClosedByAMoveIsAVisit() throws {
        let fixes = [fix(0), fix(300), fix(600), fix(700, lat: 48.01)]
        let visits = detector.detect(fixes, deviceId: "d")
        let visit = try #require(visits.first)
        #expect(visits.count == 1)
        #expect(visit.arrival == 0)
        #expect(visit.departure == 600)
        #expect(visit.id == "fixes-d-0")
        #expect(visit.horizontalAccuracy == 10)
        #expect(visit.source == "detected")
    }

    @Test func aStayOneSecondShortIsNotAVisit() {
        #expect(detector.detect([fix(0), fix(599), fix(700, lat: 48.01)], deviceId: "d").isEmpty)
    }

    @Test func anOpenStayIsNotEmitted() {
        #expect(detector.detect([fix(0), fix(3000), fix(6000)], deviceId: "d").isEmpty)
    }

    @Test func aLongGapEndsTheStay() {
        let visits = detector.detect([fix(0), fix(21_601), fix(22_000, lat: 48.01)], deviceId: "d")
        #expect(visits.isEmpty)
        let kept = detector.detect([fix(0), fix(21_600), fix(22_000, lat: 48.01)], deviceId: "d")
        #expect(kept.count == 1)
    }

    @Test func inaccurateFixesAreIgnored() {
        let visits = detector.detect(
            [fix(0), fix(300, lat: 48.01, accuracy: 51), fix(600), fix(700, lat: 48.01)], deviceId: "d")
        #expect(visits.count == 1)
    }

    @Test func markersOpenAndCloseAShortVisit() throws {
        let visits = detector.detect(
            [fix(0, context: "visit_entry"), fix(60), fix(120, context: "visit_exit")], deviceId: "d")
        let visit = try #require(visits.first)
        #expect(visit.arrival == 0)
        #expect(visit.departure == 120)
    }
}
