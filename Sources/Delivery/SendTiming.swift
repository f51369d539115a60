public import Foundation

/// A wall-clock time of day, `HH:MM` (24 h).
public struct LocalTime: Sendable, Equatable, CustomStringConvertible {
    public var hour: Int
    public var minute: Int

    public init?(hour: Int, minute: Int) {
        guard (0..<24).contains(hour), (0..<60).contains(minute) else { return nil }
        self.hour = hour
        self.minute = minute
    }

    /// `HH:MM` with two digits each (`09:30`, `22:00`); nil otherwise.
    public init?(parsing text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2,
            parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let hour = Int(parts[0]), let minute = Int(parts[1])
        else { return nil }
        self.init(hour: hour, minute: minute)
    }

    public var secondsOfDay: Int { hour * 3_600 + minute * 60 }
    public var description: String {
        (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
    }
}

/// Local hours when a device is not to be disturbed, e.g. `22:00-08:00` (across midnight when the end is earlier).
public struct QuietHours: Sendable, Equatable {
    public enum Action: String, Sendable, CaseIterable {
        /// Sent when the window ends.
        case hold
        /// Not sent.
        case drop
    }

    public var start: LocalTime
    public var end: LocalTime
    public var action: Action

    public init?(window: String, action: Action) {
        let parts = window.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = LocalTime(parsing: String(parts[0])),
            let end = LocalTime(parsing: String(parts[1])), start != end
        else { return nil }
        self.start = start
        self.end = end
        self.action = action
    }

    /// True when `secondsOfDay` (local) is inside the window: from its start (included) to its end (excluded).
    public func contains(secondsOfDay seconds: Int) -> Bool {
        start.secondsOfDay < end.secondsOfDay
            ? seconds >= start.secondsOfDay && seconds < end.secondsOfDay
            : seconds >= start.secondsOfDay || seconds < end.secondsOfDay
    }

    public var window: String { "\(start)-\(end)" }
}

/// At most `max` pushes of an app to one device within `window` seconds.
public struct FrequencyCap: Sendable, Equatable {
    public var max: Int
    public var window: Double

    public init(max: Int, window: Double) {
        self.max = max
        self.window = window
    }
}

/// Wall-clock arithmetic in an IANA zone, from the zone's offsets alone (so exact across DST changes).
public enum ZoneClock {
    /// The zone for an IANA name (`Europe/Paris`, `Asia/Kolkata`, `UTC`); nil for anything else (abbreviations
    /// such as `EST` and offsets such as `GMT+2` are not zones: their rules are not the place's).
    public static func zone(named name: String) -> TimeZone? {
        // `Area/Location` (the tz database's form; `Etc/GMT+2` included), or UTC. The platform's list of known
        // names lags behind the database (no `Asia/Kolkata`), so the name is checked by its form and by the zone
        // loading, not by that list.
        let form = name.split(separator: "/", omittingEmptySubsequences: false)
        guard
            name == "UTC"
                || (form.count >= 2
                    && form.allSatisfy { part in
                        !part.isEmpty
                            && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_-+".contains($0)) }
                    })
        else { return nil }
        return TimeZone(identifier: name)
    }

    static func offset(_ zone: TimeZone, at instant: Double) -> Int {
        zone.secondsFromGMT(for: Date(timeIntervalSince1970: instant))
    }

    /// The local day (days since 1970-01-01) and the seconds into it of `instant` in `zone`.
    public static func local(_ instant: Double, in zone: TimeZone) -> (day: Int, seconds: Int) {
        let local = Int((instant + Double(offset(zone, at: instant))).rounded(.down))
        let day = local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
        return (day, local - day * 86_400)
    }

    /// The instant when the wall clock in `zone` shows `time` on local day `day`.
    ///
    /// A time the day shows twice (the hour repeated when clocks go back) is its first occurrence. A time the day
    /// skips (the hour lost when clocks go forward) is read with the offset before the change, so it falls as far
    /// after the change as it was meant after its start: 02:30 on a day that jumps from 02:00 to 03:00 is 03:30.
    public static func instant(day: Int, time: LocalTime, in zone: TimeZone) -> Double {
        let wall = Double(day * 86_400 + time.secondsOfDay)
        // Changes are months apart: a day either side holds at most one, so these are the offsets around it.
        let before = offset(zone, at: wall - 86_400)
        let after = offset(zone, at: wall + 86_400)
        let valid = Set([before, after]).map { wall - Double($0) }.filter {
            Double(offset(zone, at: $0)) == wall - $0
        }
        return valid.min() ?? wall - Double(before)
    }

    /// The first instant at or after `base` when the wall clock in `zone` shows `time` (at most a day and an
    /// hour later, on the day clocks go back).
    public static func next(_ time: LocalTime, atOrAfter base: Double, in zone: TimeZone) -> Double {
        let today = local(base, in: zone).day
        for day in today...(today + 2) {
            let candidate = instant(day: day, time: time, in: zone)
            if candidate >= base { return candidate }
        }
        return instant(day: today + 2, time: time, in: zone)
    }
}

/// When a push goes to each device: at once, at an instant, or at a local time in each device's zone, outside
/// its quiet hours.
public struct SendTiming: Sendable, Equatable {
    /// What a push that needs a device's zone does with a device that has none.
    public enum MissingZone: String, Sendable, CaseIterable {
        /// Not sent to it (counted as skipped, rule `no_time_zone`).
        case skip
        /// The app's default zone (`time_zone` in the apps file).
        case appDefault = "app_default"
    }

    public var sendAt: Double?
    public var localTime: LocalTime?
    public var quietHours: QuietHours?
    public var missingZone: MissingZone
    public var cap: FrequencyCap?

    public init(
        sendAt: Double? = nil, localTime: LocalTime? = nil, quietHours: QuietHours? = nil,
        missingZone: MissingZone = .skip, cap: FrequencyCap? = nil
    ) {
        self.sendAt = sendAt
        self.localTime = localTime
        self.quietHours = quietHours
        self.missingZone = missingZone
        self.cap = cap
    }

    /// True when each device's zone is needed.
    public var needsZone: Bool { localTime != nil || quietHours != nil }

    public enum Decision: Sendable, Equatable {
        /// Sent at `at` (epoch seconds); `held` when quiet hours moved it.
        case send(at: Double, held: Bool)
        /// Not sent, for `rule` (`no_time_zone`, `quiet_hours`).
        case skip(rule: String)
    }

    /// The decision for one device whose zone is `zone` (nil: none, after the app's default when the push asks
    /// for it), for a push made at `now`.
    public func decide(zone: TimeZone?, now: Double) -> Decision {
        let base = max(sendAt ?? now, now)
        guard needsZone else { return .send(at: base, held: false) }
        guard let zone else { return .skip(rule: "no_time_zone") }
        var at = localTime.map { ZoneClock.next($0, atOrAfter: base, in: zone) } ?? base
        guard let quietHours, quietHours.contains(secondsOfDay: ZoneClock.local(at, in: zone).seconds) else {
            return .send(at: at, held: false)
        }
        switch quietHours.action {
        case .drop: return .skip(rule: "quiet_hours")
        case .hold:
            at = ZoneClock.next(quietHours.end, atOrAfter: at, in: zone)
            return .send(at: at, held: true)
        }
    }
}
