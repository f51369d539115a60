import Foundation

/// Time features and the home/work label of ZOIs (docs/LOCATION-RULES.md §3; the SDK's ZOIQualifiers.swift).
public enum ZOIQualifier {
    /// One change of presence: an entry or an exit at an hour.
    public struct Change: Sendable, Equatable {
        public var isEntry: Bool
        public var hour: Int
        public init(isEntry: Bool, hour: Int) {
            self.isEntry = isEntry
            self.hour = hour
        }
    }

    static let periods: [(name: String, segments: [(Int, Int)])] = [
        (ZOIPeriod.home, [(0, 7), (21, 24)]),
        (ZOIPeriod.work, [(9, 17)]),
    ]

    /// Surge's mean: a left-to-right sum from 0.0 divided by the count.
    static func mean(_ values: [Double]) -> Double {
        var sum = 0.0
        for v in values { sum += v }
        return sum / Double(values.count)
    }

    /// Gregorian week of year in UTC, weeks starting Sunday, week 1 the one holding January 1 (§3.1). The
    /// year is ignored, so the last days of December can be week 1.
    public static func week(_ t: Double) -> Int {
        let day = Int((t / 86_400).rounded(.down))
        let (year, dayOfYear) = civilYear(day)
        let jan1 = day - dayOfYear
        let weekdayJan1 = sundayWeekday(jan1)
        let nextJan1 = jan1 + (isLeap(year) ? 366 : 365)
        let weekdayNext = sundayWeekday(nextJan1)
        if weekdayNext != 0, day >= nextJan1 - weekdayNext { return 1 }
        return (dayOfYear + weekdayJan1) / 7 + 1
    }

    /// 0 = Sunday … 6 = Saturday for a day number since 1970-01-01 (a Thursday).
    static func sundayWeekday(_ day: Int) -> Int { ((day % 7) + 7 + 4) % 7 }

    static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    /// The year and the zero-based day of year of a day number since 1970-01-01.
    static func civilYear(_ day: Int) -> (year: Int, dayOfYear: Int) {
        // Howard Hinnant's days-to-civil, then the day of year from January 1.
        let z = day + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        var y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let m = mp < 10 ? mp + 3 : mp - 9
        if m <= 2 { y += 1 }
        return (y, day - daysFromCivil(year: y, month: 1, day: 1))
    }

    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The week numbers a visit covers (§3.1): `ws…we`, with `ws −= 52` when the visit crosses New Year.
    public static func weeks(arrival: Double, departure: Double) -> [Int] {
        var start = week(arrival)
        let end = week(departure)
        if start > end { start -= 52 }
        guard end >= start else { return [] }
        return Array(start...end)
    }

    /// The UTC hour bin of an instant: Monday 0 … Sunday 6, times 24, plus the hour.
    public static func bin(_ t: Double) -> Int {
        let seconds = Int(t.rounded(.down))
        let day = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let hour = (seconds - day * 86_400) / 3600
        let mondayBased = (sundayWeekday(day) + 6) % 7
        return mondayBased * 24 + hour
    }

    /// Adds a visit's hours to a weekly density (§3.2): one per started hour from the arrival's minute.
    public static func addVisit(arrival: Double, departure: Double, to density: inout [Double]) {
        var t = arrival
        while t < departure {
            density[bin(t)] += 1
            t += 3600
        }
    }

    /// Presence changes of a weekly density (§3.4), by day key "1"…"7".
    public static func dailyPresence(_ density: [Double]) -> [String: [Change]] {
        let m = mean(density)
        var days: [String: [Change]] = [:]
        for hour in 0..<density.count {
            let previous = density[hour == 0 ? density.count - 1 : hour - 1] >= m
            let current = density[hour] >= m
            if previous != current {
                days[String(hour / 24 + 1), default: []].append(Change(isEntry: !previous, hour: hour % 24))
            }
        }
        return days
    }

    /// Average daily intervals (§3.5), as alternating entry/exit changes; nil when the density has no change.
    public static func averageIntervals(_ density: [Double]) -> [Change]? {
        let days = dailyPresence(density)
        guard !days.isEmpty else { return nil }
        var daily = [Double](repeating: 0, count: 24)
        let keys = days.keys.sorted()
        var previous = days[keys.last!]!.last!
        for key in keys {
            for change in days[key]! {
                if !change.isEntry {
                    var hour = previous.hour
                    while hour != change.hour {
                        daily[hour] += 1
                        hour = (hour + 1) % 24
                    }
                }
                previous = change
            }
        }
        let m = mean(daily)
        var changes: [Change] = []
        for hour in 0..<24 {
            let previousOn = daily[hour == 0 ? 23 : hour - 1] >= m
            let on = daily[hour] >= m
            if previousOn != on { changes.append(Change(isEntry: !previousOn, hour: hour)) }
        }
        if let first = changes.first, !first.isEntry { changes.insert(Change(isEntry: true, hour: 0), at: 0) }
        if let last = changes.last, last.isEntry { changes.append(Change(isEntry: false, hour: 24)) }
        return changes
    }

    /// Length of the overlap of two hour intervals; 0 unless an endpoint of one lies in the other (§3.6).
    public static func overlap(_ a: (Int, Int), _ b: (Int, Int)) -> Int {
        if (a.0 <= b.0 && b.0 <= a.1) || (a.0 <= b.1 && b.1 <= a.1) || (b.0 <= a.0 && a.0 <= b.1)
            || (b.0 <= a.1 && a.1 <= b.1)
        {
            return min(a.1, b.1) - max(a.0, b.0)
        }
        return 0
    }

    /// The period label of a recurrent ZOI's weekly density (§3.5-3.6).
    public static func label(_ density: [Double]) -> String {
        guard let changes = averageIntervals(density) else { return ZOIPeriod.other }
        var intervals: [(Int, Int)] = []
        var i = 0
        while i + 1 < changes.count {
            intervals.append((changes[i].hour, changes[i + 1].hour))
            i += 2
        }
        var label: String?
        for period in periods {
            var timeOn = 0
            var length = 0
            for segment in period.segments {
                length += segment.1 - segment.0
                for interval in intervals { timeOn += overlap(segment, interval) }
            }
            if timeOn >= length / 2 { label = period.name }
        }
        return label ?? ZOIPeriod.other
    }
}
