import Foundation
import LocationCore
import TestSupport
import Testing

/// The SDK's qualifier fixtures (T/ZoiQualifierTests.swift) and the checks of docs/LOCATION-RULES.md §3.
@Suite struct ZOIQualifierTests {
    static func utc(_ y: Int, _ mo: Int, _ d: Int, _ h: Int = 0, _ mi: Int = 0) -> Double {
        VisitFile.parseDate(String(format: "%04d-%02d-%02d %02d:%02d:00+00", y, mo, d, h, mi))!
    }

    static let densityVector: [Double] = [
        0.0, 1.0, 10.0, 10.0, 3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        1.0, 1.0, 12.0, 12.0, 12.0, 25.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 1.0, 2.0, 1.0, 1.0, 12.0, 18.0, 21.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 10.0, 16.0, 1.0, 0.0,
    ]

    typealias C = ZOIQualifier.Change

    @Test func weeklyDensityOfADayLongVisit() {
        var density = [Double](repeating: 0, count: 168)
        ZOIQualifier.addVisit(
            arrival: Self.utc(2019, 3, 25, 12, 10), departure: Self.utc(2019, 3, 26, 9, 50), to: &density)
        var expected = [Double](repeating: 0, count: 168)
        for i in 12...33 { expected[i] = 1 }
        #expect(density == expected)
    }

    @Test func weeklyDensityOfAnEightDayVisitWrapsRound() {
        var density = [Double](repeating: 0, count: 168)
        ZOIQualifier.addVisit(
            arrival: Self.utc(2019, 3, 25, 12, 10), departure: Self.utc(2019, 4, 2, 9, 50), to: &density)
        var expected = [Double](repeating: 1, count: 168)
        for i in 12...33 { expected[i] = 2 }
        #expect(density == expected)
    }

    @Test func aZeroLengthVisitAddsNoBin() {
        var density = [Double](repeating: 0, count: 168)
        let t = Self.utc(2019, 3, 25, 12, 10)
        ZOIQualifier.addVisit(arrival: t, departure: t, to: &density)
        #expect(density.allSatisfy { $0 == 0 })
    }

    @Test func weeksAcrossAYear() {
        #expect(
            ZOIQualifier.weeks(arrival: Self.utc(2019, 3, 25, 12, 10), departure: Self.utc(2020, 4, 16, 9, 50)) == [
                13, 14, 15, 16,
            ])
    }

    @Test func weekNumbersAroundNewYear() {
        // 2019-12-29 is a Sunday and its week holds 2020-01-01: week 1 (the year is ignored).
        #expect(ZOIQualifier.week(Self.utc(2019, 12, 28, 12)) == 52)
        #expect(ZOIQualifier.week(Self.utc(2019, 12, 29, 0)) == 1)
        #expect(ZOIQualifier.week(Self.utc(2019, 12, 31, 23, 59)) == 1)
        #expect(ZOIQualifier.week(Self.utc(2020, 1, 4, 12)) == 1)
        #expect(ZOIQualifier.week(Self.utc(2020, 1, 5, 0)) == 2)
        // 2017 starts on a Sunday: no partial week; 2016-12-31 (Saturday) is week 53 of 2016.
        #expect(ZOIQualifier.week(Self.utc(2016, 12, 31, 12)) == 53)
        #expect(ZOIQualifier.week(Self.utc(2017, 1, 1, 0)) == 1)
        // A visit across New Year: 52 → 1 becomes 0…1 (ws −= 52).
        #expect(ZOIQualifier.weeks(arrival: Self.utc(2019, 12, 27, 20), departure: Self.utc(2020, 1, 2, 8)) == [0, 1])
    }

    @Test func dailyPresenceOfTheSDKVector() {
        let days = ZOIQualifier.dailyPresence(Self.densityVector)
        #expect(days.keys.sorted() == ["1", "2", "4", "5", "7"])
        #expect(days["1"] == [C(isEntry: true, hour: 2), C(isEntry: false, hour: 5)])
        #expect(days["2"] == [C(isEntry: true, hour: 0), C(isEntry: false, hour: 4)])
        #expect(days["4"] == [C(isEntry: true, hour: 22), C(isEntry: false, hour: 23)])
        #expect(
            days["5"] == [
                C(isEntry: true, hour: 0), C(isEntry: false, hour: 1), C(isEntry: true, hour: 3),
                C(isEntry: false, hour: 6),
            ])
        #expect(days["7"] == [C(isEntry: true, hour: 20), C(isEntry: false, hour: 22)])
    }

    @Test func averageIntervalsOfTheSDKVector() {
        #expect(
            ZOIQualifier.averageIntervals(Self.densityVector) == [
                C(isEntry: true, hour: 0), C(isEntry: false, hour: 6), C(isEntry: true, hour: 20),
                C(isEntry: false, hour: 23),
            ])
        #expect(ZOIQualifier.averageIntervals([Double](repeating: 0, count: 168)) == nil)
    }

    @Test func overlapLengths() {
        #expect(ZOIQualifier.overlap((2, 8), (6, 12)) == 2)
        #expect(ZOIQualifier.overlap((2, 8), (9, 10)) == 0)
        #expect(ZOIQualifier.overlap((2, 8), (3, 6)) == 3)
        // Touching intervals give 0.
        #expect(ZOIQualifier.overlap((0, 7), (7, 9)) == 0)
    }

    @Test func classificationThresholds() {
        // HOME needs ≥ 5 of its 10 hours, WORK ≥ 4 of 8; WORK wins when both qualify; none gives OTHER.
        func density(_ hours: ClosedRange<Int>...) -> [Double] {
            var d = [Double](repeating: 0, count: 168)
            for day in 0..<7 { for r in hours { for h in r { d[day * 24 + h] = 1 } } }
            return d
        }
        #expect(ZOIQualifier.label(density(0...4)) == ZOIPeriod.home)  // [0,5]: 5 h of home
        #expect(ZOIQualifier.label(density(0...3)) == ZOIPeriod.other)  // [0,4]: 4 h
        #expect(ZOIQualifier.label(density(9...12)) == ZOIPeriod.work)  // [9,13]: 4 h of work
        #expect(ZOIQualifier.label(density(9...11)) == ZOIPeriod.other)  // [9,12]: 3 h
        #expect(ZOIQualifier.label(density(0...4, 9...12)) == ZOIPeriod.work)  // both: the last one wins
        #expect(ZOIQualifier.label([Double](repeating: 0, count: 168)) == ZOIPeriod.other)
    }

    @Test func sdkHomeAndWorkVectors() {
        var home = [Double](repeating: 0, count: 168)
        for i in [0, 1, 2, 3, 4, 5, 22, 23, 24, 25, 26, 27, 28, 29, 94, 95, 96, 97, 98, 99, 100, 101] { home[i] = 1 }
        #expect(ZOIQualifier.label(home) == ZOIPeriod.home)
        var work = [Double](repeating: 0, count: 168)
        for (i, v) in [(8, 2.0), (9, 1), (10, 1), (11, 1), (12, 2), (13, 2), (14, 2)] { work[i] = v }
        #expect(ZOIQualifier.label(work) == ZOIPeriod.work)
    }

    @Test func visitQualifReplayAgreesWithTheSpecCounts() throws {
        let url = repositoryRoot.appendingPathComponent("Tests/Fixtures/location/Visit_qualif.csv")
        let text = try String(contentsOf: url, encoding: .utf8)
        let visits = try VisitFile.sampleCSV(text, deviceId: "sample")
        #expect(visits.count == 164)
        let zois = VisitIntake(settings: LocationSettings(), makeId: { _ in UUID().uuidString }).replaySample(visits)
        var periodOfVisit: [String: String] = [:]
        for zoi in zois { for id in zoi.visitIds { periodOfVisit[id] = zoi.period ?? "" } }
        #expect(periodOfVisit.count == 164)
        // The file's own labels (7th column) against the computed periods, over the kept rows.
        var tally: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let columns = line.split(separator: ",", omittingEmptySubsequences: false)
            guard columns.count >= 7, let period = periodOfVisit[String(columns[0])] else { continue }
            let label = columns[6].trimmingCharacters(in: .whitespaces)
            guard !label.isEmpty else { continue }
            tally["\(label)->\(period)", default: 0] += 1
        }
        #expect(tally["WORK->WORK_PERIOD"] == 46)
        #expect(tally["HOME->HOME_PERIOD"] == 28)
        #expect(tally["HOME->WORK_PERIOD"] == 8)
        #expect(tally.values.reduce(0, +) == 82)
    }
}
