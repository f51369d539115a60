import Delivery
import Foundation
import Testing

/// Local times and quiet hours, checked against instants written in UTC by hand from each zone's published rules
/// (not computed by the code under test).
@Suite("Send timing: local times, DST edges, quiet hours")
struct SendTimingTests {
    /// Epoch seconds of a UTC wall time.
    static func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int) -> Double {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let date = calendar.date(
            from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute))!
        return date.timeIntervalSince1970
    }

    static func zone(_ name: String) -> TimeZone { ZoneClock.zone(named: name)! }
    static func at(_ text: String) -> LocalTime { LocalTime(parsing: text)! }

    func sendTime(_ timing: SendTiming, zone: String?, now: Double) -> Double? {
        if case .send(let at, _) = timing.decide(zone: zone.map(Self.zone), now: now) { return at }
        return nil
    }

    @Test("09:30 in Paris and New York on an ordinary day, in each zone's own morning")
    func ordinaryDay() {
        let now = Self.utc(2026, 6, 10, 5, 0)
        let timing = SendTiming(localTime: Self.at("09:30"))
        #expect(sendTime(timing, zone: "Europe/Paris", now: now) == Self.utc(2026, 6, 10, 7, 30))  // CEST +2
        #expect(sendTime(timing, zone: "America/New_York", now: now) == Self.utc(2026, 6, 10, 13, 30))  // EDT -4
        // Already past in Tokyo (+9, 14:00 there): tomorrow's.
        #expect(sendTime(timing, zone: "Asia/Tokyo", now: now) == Self.utc(2026, 6, 11, 0, 30))
    }

    @Test("zones whose offset is not a whole hour: Kolkata +05:30, Kathmandu +05:45, Chatham +12:45")
    func partHourZones() {
        let now = Self.utc(2026, 6, 10, 0, 0)
        let timing = SendTiming(localTime: Self.at("09:30"))
        #expect(sendTime(timing, zone: "Asia/Kolkata", now: now) == Self.utc(2026, 6, 10, 4, 0))
        #expect(sendTime(timing, zone: "Asia/Kathmandu", now: now) == Self.utc(2026, 6, 10, 3, 45))
        // Chatham in June is on standard time, +12:45: 09:30 there on the 10th is 20:45 UTC on the 9th (past),
        // so the 11th's, 20:45 UTC on the 10th.
        #expect(sendTime(timing, zone: "Pacific/Chatham", now: now) == Self.utc(2026, 6, 10, 20, 45))
    }

    @Test("Paris, spring forward (2027-03-28, 02:00 CET becomes 03:00 CEST at 01:00 UTC)")
    func parisSpringForward() {
        let now = Self.utc(2027, 3, 27, 23, 0)  // Midnight in Paris, the day of the change.
        #expect(
            sendTime(SendTiming(localTime: Self.at("09:30")), zone: "Europe/Paris", now: now)
                == Self.utc(2027, 3, 28, 7, 30))
        #expect(
            sendTime(SendTiming(localTime: Self.at("01:30")), zone: "Europe/Paris", now: now)
                == Self.utc(2027, 3, 28, 0, 30))
        // 02:30 does not exist that day: read with the offset before the change (CET), 01:30 UTC = 03:30 CEST.
        #expect(
            sendTime(SendTiming(localTime: Self.at("02:30")), zone: "Europe/Paris", now: now)
                == Self.utc(2027, 3, 28, 1, 30))
    }

    @Test("Paris, fall back (2026-10-25, 03:00 CEST becomes 02:00 CET at 01:00 UTC): a repeated time is its first")
    func parisFallBack() {
        let now = Self.utc(2026, 10, 24, 22, 0)  // Midnight in Paris (CEST), the day of the change.
        #expect(
            sendTime(SendTiming(localTime: Self.at("02:30")), zone: "Europe/Paris", now: now)
                == Self.utc(2026, 10, 25, 0, 30))
        #expect(
            sendTime(SendTiming(localTime: Self.at("09:30")), zone: "Europe/Paris", now: now)
                == Self.utc(2026, 10, 25, 8, 30))
        // After the first 02:30 has passed, the next 02:30 is the following day's (the repeat is not used).
        #expect(
            sendTime(SendTiming(localTime: Self.at("02:30")), zone: "Europe/Paris", now: Self.utc(2026, 10, 25, 0, 31))
                == Self.utc(2026, 10, 26, 1, 30))
    }

    @Test("New York: fall back 2026-11-01 (06:00 UTC) and spring forward 2027-03-14 (07:00 UTC)")
    func newYork() {
        let fall = Self.utc(2026, 11, 1, 4, 0)  // Midnight EDT.
        #expect(
            sendTime(SendTiming(localTime: Self.at("01:30")), zone: "America/New_York", now: fall)
                == Self.utc(2026, 11, 1, 5, 30))
        #expect(
            sendTime(SendTiming(localTime: Self.at("09:30")), zone: "America/New_York", now: fall)
                == Self.utc(2026, 11, 1, 14, 30))
        let spring = Self.utc(2027, 3, 14, 5, 0)  // Midnight EST.
        #expect(
            sendTime(SendTiming(localTime: Self.at("02:30")), zone: "America/New_York", now: spring)
                == Self.utc(2027, 3, 14, 7, 30))
        #expect(
            sendTime(SendTiming(localTime: Self.at("09:30")), zone: "America/New_York", now: spring)
                == Self.utc(2027, 3, 14, 13, 30))
    }

    @Test("Lord Howe moves its clocks by half an hour (+10:30 to +11 on 2026-10-04 at 02:00 local)")
    func lordHowe() {
        let now = Self.utc(2026, 10, 3, 13, 30)  // Midnight at +10:30.
        // 02:15 is skipped (02:00 becomes 02:30): read at +10:30, 15:45 UTC, shown as 02:45.
        #expect(
            sendTime(SendTiming(localTime: Self.at("02:15")), zone: "Australia/Lord_Howe", now: now)
                == Self.utc(2026, 10, 3, 15, 45))
        #expect(
            sendTime(SendTiming(localTime: Self.at("09:30")), zone: "Australia/Lord_Howe", now: now)
                == Self.utc(2026, 10, 3, 22, 30))
    }

    @Test("send_at: sent then, or at once when it has passed; local_time counts from it")
    func sendAt() {
        let now = Self.utc(2026, 6, 10, 5, 0)
        #expect(sendTime(SendTiming(sendAt: now + 600), zone: nil, now: now) == now + 600)
        #expect(sendTime(SendTiming(sendAt: now - 30), zone: nil, now: now) == now)
        let timing = SendTiming(sendAt: Self.utc(2026, 6, 10, 8, 0), localTime: Self.at("09:30"))
        #expect(sendTime(timing, zone: "Europe/Paris", now: now) == Self.utc(2026, 6, 11, 7, 30))
    }

    @Test("quiet hours 22:00-08:00: hold sends at 08:00 local, drop does not send, outside them nothing moves")
    func quietHours() {
        let hold = QuietHours(window: "22:00-08:00", action: .hold)!
        let drop = QuietHours(window: "22:00-08:00", action: .drop)!
        let lateInParis = Self.utc(2026, 6, 10, 21, 0)  // 23:00 CEST.
        #expect(
            SendTiming(quietHours: hold).decide(zone: Self.zone("Europe/Paris"), now: lateInParis)
                == .send(at: Self.utc(2026, 6, 11, 6, 0), held: true))
        #expect(
            SendTiming(quietHours: drop).decide(zone: Self.zone("Europe/Paris"), now: lateInParis)
                == .skip(rule: "quiet_hours"))
        // The same instant is 17:00 in New York: not quiet.
        #expect(
            SendTiming(quietHours: drop).decide(zone: Self.zone("America/New_York"), now: lateInParis)
                == .send(at: lateInParis, held: false))
        // The end is excluded, the start included.
        #expect(
            SendTiming(quietHours: drop).decide(zone: Self.zone("UTC"), now: Self.utc(2026, 6, 10, 8, 0))
                == .send(at: Self.utc(2026, 6, 10, 8, 0), held: false))
        #expect(
            SendTiming(quietHours: drop).decide(zone: Self.zone("UTC"), now: Self.utc(2026, 6, 10, 22, 0))
                == .skip(rule: "quiet_hours"))
        // A window within one day.
        let lunch = QuietHours(window: "12:00-14:00", action: .hold)!
        #expect(
            SendTiming(quietHours: lunch).decide(zone: Self.zone("UTC"), now: Self.utc(2026, 6, 10, 13, 0))
                == .send(at: Self.utc(2026, 6, 10, 14, 0), held: true))
    }

    @Test("a local time inside quiet hours is held to their end")
    func localTimeInQuietHours() {
        let timing = SendTiming(
            localTime: Self.at("07:00"), quietHours: QuietHours(window: "22:00-08:00", action: .hold))
        #expect(
            timing.decide(zone: Self.zone("Europe/Paris"), now: Self.utc(2026, 6, 10, 3, 0))
                == .send(at: Self.utc(2026, 6, 10, 6, 0), held: true))
    }

    @Test("a device without a zone is skipped when the push needs one; names that are not IANA zones are refused")
    func zones() {
        #expect(SendTiming(localTime: Self.at("09:30")).decide(zone: nil, now: 0) == .skip(rule: "no_time_zone"))
        #expect(SendTiming().decide(zone: nil, now: 5) == .send(at: 5, held: false))
        #expect(ZoneClock.zone(named: "Europe/Paris") != nil)
        #expect(ZoneClock.zone(named: "UTC") != nil)
        #expect(ZoneClock.zone(named: "EST") == nil)
        #expect(ZoneClock.zone(named: "GMT+2") == nil)
        #expect(ZoneClock.zone(named: "Mars/Olympus") == nil)
        #expect(LocalTime(parsing: "9:30") == nil)
        #expect(LocalTime(parsing: "24:00") == nil)
        #expect(LocalTime(parsing: "09:60") == nil)
        #expect(QuietHours(window: "22:00-22:00", action: .hold) == nil)
        #expect(QuietHours(window: "22:00", action: .hold) == nil)
    }
}
