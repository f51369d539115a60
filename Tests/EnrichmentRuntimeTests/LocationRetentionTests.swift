import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore
import Synchronization
import Testing

/// A clock that stands still until moved (retention boundaries are exact to the second).
final class SteppedClock: WallClock {
    let seconds: Mutex<Double>
    init(_ start: Double) { seconds = Mutex(start) }
    func now() -> Date { Date(timeIntervalSince1970: seconds.withLock { $0 }) }
    func advance(_ by: Double) { seconds.withLock { $0 += by } }
}

@Suite("Location retention (the daily job), with an injected clock")
struct LocationRetentionTests {
    static func visits(_ items: [(arrival: Double, lat: Double)]) -> JSONValue {
        .object([
            "visits": .array(
                items.map {
                    .object([
                        "arrival": .double($0.arrival), "departure": .double($0.arrival + 3600),
                        "latitude": .double($0.lat), "longitude": .double(2), "horizontal_accuracy": .double(10),
                    ])
                })
        ])
    }

    @Test("visits, events and fixes captured 30 days ago go; ZOIs lose their ids but keep their Gaussian")
    func retention() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ret-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = ServiceConfiguration()
        configuration.databasePath = directory.appendingPathComponent("db.sqlite").path
        configuration.loadSamplePOIs = false
        let clock = SteppedClock(1_800_000_000)
        let runtime = try await EnrichmentRuntime.open(configuration, clock: clock)
        let location = runtime.location
        let t0 = clock.now().timeIntervalSince1970
        // Two visits at one place and one elsewhere, recorded now.
        _ = try await location.reportVisits(
            deviceId: "d", document: Self.visits([(t0 - 90_000, 48), (t0 - 40_000, 48), (t0 - 20_000, 49)]))
        try await runtime.fixes.insert([
            LocationFix(deviceId: "d", coordinate: .init(latitude: 48, longitude: 2), fixTime: t0, receivedAt: t0)
        ])
        let before = try #require(try await location.zois(deviceId: "d"))
        #expect(before.count == 2)
        // Two days later, one more visit at the first place.
        clock.advance(2 * 86_400)
        _ = try await location.reportVisits(deviceId: "d", document: Self.visits([(t0 + 100_000, 48)]))
        let withFourth = try #require(try await location.zois(deviceId: "d"))
        #expect(withFourth[0].visitIds.count == 3)

        // One second short of 30 days after t0: nothing is old enough.
        let early = try await location.runRetention(now: t0 + 30 * 86_400 - 1)
        #expect(early.visits == 0 && early.events == 0 && early.fixes == 0)
        // Exactly 30 days: captured at or before now − 30 d goes (the first three visits, their events, the fix).
        let report = try await location.runRetention(now: t0 + 30 * 86_400)
        #expect(report.visits == 3)
        #expect(report.fixes == 1)
        #expect(report.events == 3)
        let after = try #require(try await location.zois(deviceId: "d"))
        #expect(after.count == 1)
        #expect(after[0].visitIds.count == 1)
        #expect(after[0].meanX == withFourth[0].meanX)
        #expect(after[0].inverse == withFourth[0].inverse)
        #expect(after[0].prior == 1)
        #expect(after[0].duration == 3600)
        #expect(try await location.visits(deviceId: "d")?.count == 1)
        #expect(try await location.events(deviceId: "d", limit: 10)?.count == 1)
    }
}
