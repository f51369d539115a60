import EnrichmentCore
import Foundation
import Testing

@Suite("Staleness rules")
struct StalenessPolicyTests {
    let ts: Int64 = 1_589_288_354
    let policy = StalenessPolicy()

    func reading(_ ts: Int64?) -> TimestampReading {
        TimestampReading(timestamp: ts, source: ts == nil ? nil : .apsInteger, problem: nil)
    }
    func at(_ seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }

    @Test("exactly 300 s old is fresh")
    func exactly300() {
        let verdict = policy.evaluate(reading(ts), now: at(Double(ts) + 300))
        #expect(verdict.state == .fresh)
        #expect(verdict.rule == .withinWindow)
        #expect(verdict.ageSeconds == 300)
    }

    @Test("301 s old is stale")
    func exactly301() {
        let verdict = policy.evaluate(reading(ts), now: at(Double(ts) + 301))
        #expect(verdict.state == .stale)
        #expect(verdict.rule == .olderThanWindow)
        #expect(verdict.ageSeconds == 301)
    }

    @Test("a fractional now is floored: 300.999 s is still fresh")
    func fractionalNow() {
        #expect(policy.evaluate(reading(ts), now: at(Double(ts) + 300.999)).state == .fresh)
        #expect(policy.evaluate(reading(ts), now: at(Double(ts) + 301.0)).state == .stale)
    }

    @Test("a future timestamp is never stale without maxFutureSkew")
    func future() {
        let verdict = policy.evaluate(reading(ts + 86_400 * 365), now: at(Double(ts)))
        #expect(verdict.state == .fresh)
        #expect(verdict.rule == .futureAccepted)
    }

    @Test("maxFutureSkew rejects beyond the skew and accepts at it")
    func futureSkew() {
        let strict = StalenessPolicy(window: 300, maxFutureSkew: 60)
        #expect(strict.evaluate(reading(ts + 60), now: at(Double(ts))).state == .fresh)
        let verdict = strict.evaluate(reading(ts + 61), now: at(Double(ts)))
        #expect(verdict.state == .stale)
        #expect(verdict.rule == .futureSkew)
    }

    @Test("a missing timestamp is its own verdict")
    func missing() {
        let verdict = policy.evaluate(reading(nil), now: at(Double(ts)))
        #expect(verdict.state == .noTimestamp)
        #expect(verdict.rule == .missingTimestamp)
    }

    @Test("a custom window moves the boundary")
    func customWindow() {
        let policy = StalenessPolicy(window: 10)
        #expect(policy.evaluate(reading(ts), now: at(Double(ts) + 10)).state == .fresh)
        #expect(policy.evaluate(reading(ts), now: at(Double(ts) + 11)).state == .stale)
    }

    @Test("extreme timestamps do not overflow")
    func extremes() {
        #expect(policy.evaluate(reading(Int64.min + 1), now: at(0)).state == .stale)
        #expect(policy.evaluate(reading(Int64.max), now: at(0)).state == .fresh)
    }
}
