import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import InMemoryTracing
import Logging
import Synchronization
import Testing
import Tracing

@testable import EnrichmentService

/// Fix reports gathered into batches (`FixIntake`), over a real SQLite runtime with a custom region: what each
/// report is answered, what is stored, and how many writes the batches took.
@Suite("Fix reports stored and evaluated in batches")
struct FixIntakeTests {
    /// The runtime's real store, with its inserts counted, the first one held until `release`, and (optionally)
    /// a refusal of every write that holds a fix of device `refused`.
    final class ObservedStore: FixStore, Sendable {
        struct Refused: DataRefusal, CustomStringConvertible {
            var description: String { "the database refused the batch's data" }
        }

        /// Not a data refusal: the database gone.
        struct Unavailable: Error {}

        let base: any FixStore
        let refused: String?
        /// A write of this device alone finds the database gone.
        let unavailableAlone: String?
        let writes = Mutex<[[String]]>([])
        let held = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let holding = Mutex(true)

        init(base: any FixStore, refused: String? = nil, unavailableAlone: String? = nil) {
            self.base = base
            self.refused = refused
            self.unavailableAlone = unavailableAlone
        }

        func release() { held.withLock { $0.take() }?.resume() }
        var heldNow: Bool { held.withLock { $0 != nil } }

        func write(_ fixes: [LocationFix]) async throws -> PriorFixes? {
            writes.withLock { $0.append(Array(Set(fixes.map(\.deviceId))).sorted()) }
            if holding.withLock({ value in
                defer { value = false }
                return value
            }) {
                await withCheckedContinuation { continuation in held.withLock { $0 = continuation } }
            }
            if let refused, fixes.contains(where: { $0.deviceId == refused }) { throw Refused() }
            if let unavailableAlone, fixes.allSatisfy({ $0.deviceId == unavailableAlone }) { throw Unavailable() }
            return try await base.insertReportingPrior(fixes)
        }

        func insert(_ fixes: [LocationFix]) async throws { _ = try await write(fixes) }
        func insertReportingPrior(_ fixes: [LocationFix]) async throws -> PriorFixes? { try await write(fixes) }
        func latestFix(deviceId: String) async throws -> LocationFix? { try await base.latestFix(deviceId: deviceId) }
        func deleteDevice(_ deviceId: String) async throws -> Int { try await base.deleteDevice(deviceId) }
        func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix] {
            try await base.latestFixes(deviceIds: deviceIds)
        }
        func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
            try await base.fixes(deviceId: deviceId, after: after, before: before, limit: limit)
        }
    }

    struct Setup {
        var runtime: EnrichmentRuntime
        var store: ObservedStore
        var intake: FixIntake
        var directory: URL
    }

    /// A runtime on a fresh SQLite file with a 150 m region in the countryside (no sample POI near: one event per
    /// entry).
    static func setup(
        refused: String? = nil, unavailableAlone: String? = nil, tracer: InMemoryTracer? = nil, batches: Int = 1,
        maximumFixes: Int = 10_000
    ) async throws -> Setup {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("intake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = ServiceConfiguration()
        configuration.databasePath = directory.appendingPathComponent("db.sqlite").path
        let runtime = try await EnrichmentRuntime.open(
            configuration, clock: SystemWallClock(), logger: Logger(label: "intake"), deliveryObserver: nil,
            placesInBackground: false)
        let region = try runtime.location.region(
            from: .object([
                "id": .string("tower"), "latitude": .double(46.5), "longitude": .double(3.5),
                "radius": .double(150),
            ]))
        _ = try await runtime.location.putRegion(region)
        let store = ObservedStore(base: runtime.fixes, refused: refused, unavailableAlone: unavailableAlone)
        let intake = FixIntake(
            fixes: store, location: runtime.location, spans: SpanRecorder(tracer), timeout: nil,
            maximumBatches: batches, maximumFixes: maximumFixes, logger: Logger(label: "intake"))
        return Setup(runtime: runtime, store: store, intake: intake, directory: directory)
    }

    static let now = Date().timeIntervalSince1970

    /// Two fixes of `device`: away, then at the region (entering it) when `enters`, else farther still.
    static func report(_ device: String, enters: Bool, offset: Double = 0) -> [LocationFix] {
        [
            LocationFix(
                deviceId: device, coordinate: Coordinate(latitude: 46.4, longitude: 3.4),
                fixTime: now - 120 + offset, horizontalAccuracy: 10, receivedAt: now),
            LocationFix(
                deviceId: device,
                coordinate: enters
                    ? Coordinate(latitude: 46.5, longitude: 3.5) : Coordinate(latitude: 46.3, longitude: 3.3),
                fixTime: now - 60 + offset, horizontalAccuracy: 10, receivedAt: now),
        ]
    }

    static func waitUntil(_ condition: @escaping @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test(
        "reports arriving while a batch runs are stored in one write; each is answered with its own device's events; a device's second report waits for the next batch"
    )
    func gathered() async throws {
        let setup = try await Self.setup()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let intake = setup.intake
        let first = Task { try await intake.submit(deviceId: "d-first", fixes: Self.report("d-first", enters: true)) }
        try await Self.waitUntil { setup.store.heldNow }
        var gathered: [Task<FixIntake.Outcome, any Error>] = []
        for n in 0..<10 {
            let device = "d-\(n)"
            gathered.append(
                Task { try await intake.submit(deviceId: device, fixes: Self.report(device, enters: n < 4)) })
        }
        // A second report of d-0, after its first (the ten are pending): leaves the region.
        try await Self.waitUntil { intake.pendingCount == 10 }
        let again = Task {
            try await intake.submit(deviceId: "d-0", fixes: Self.report("d-0", enters: false, offset: 30))
        }
        try await Self.waitUntil { intake.pendingCount == 11 }
        setup.store.release()

        #expect(try await first.value.events == 1)
        for (n, task) in gathered.enumerated() {
            let outcome = try await task.value
            #expect(outcome.events == (n < 4 ? 1 : 0), "d-\(n)")
            #expect(outcome.locationError == nil)
        }
        // d-0 left the region: its own exit, not its first report's entry.
        let second = try await again.value
        #expect(second.events == 1)
        let events = try await setup.runtime.location.events(deviceId: "d-0", limit: 10) ?? []
        #expect(events.map(\.type).sorted() == ["region_enter", "region_exit"])
        let writes = setup.store.writes.withLock { $0 }
        #expect(writes.count == 3, "\(writes)")
        #expect(writes.dropFirst().first == (0..<10).map { "d-\($0)" }.sorted())
        #expect(writes.last == ["d-0"])
        for n in 0..<10 {
            let fix = try await setup.runtime.fixes.latestFix(deviceId: "d-\(n)")
            #expect(fix?.fixTime == Self.now - 60 + (n == 0 ? 30 : 0))
        }
    }

    @Test("a batch the database refuses for one report's data: each report is stored alone, and only that one fails")
    func refusedAlone() async throws {
        let setup = try await Self.setup(refused: "d-bad")
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let intake = setup.intake
        let first = Task { try await intake.submit(deviceId: "d-first", fixes: Self.report("d-first", enters: false)) }
        try await Self.waitUntil { setup.store.heldNow }
        let good = Task { try await intake.submit(deviceId: "d-good", fixes: Self.report("d-good", enters: true)) }
        let bad = Task { try await intake.submit(deviceId: "d-bad", fixes: Self.report("d-bad", enters: true)) }
        let other = Task { try await intake.submit(deviceId: "d-other", fixes: Self.report("d-other", enters: false)) }
        try await Self.waitUntil { intake.pendingCount == 3 }
        setup.store.release()

        #expect(try await first.value.events == 0)
        #expect(try await good.value.events == 1)
        #expect(try await other.value.events == 0)
        await #expect(throws: ObservedStore.Refused.self) { try await bad.value }
        #expect(try await setup.runtime.fixes.latestFix(deviceId: "d-good") != nil)
        #expect(try await setup.runtime.fixes.latestFix(deviceId: "d-other") != nil)
        #expect(try await setup.runtime.fixes.latestFix(deviceId: "d-bad") == nil)
        // The gathered write, then each of its three reports alone.
        #expect(setup.store.writes.withLock { $0.count } == 5)
    }

    @Test("a report cancelled while it waits for a batch is answered at once, and its fixes are not stored")
    func cancelledWhileWaiting() async throws {
        let setup = try await Self.setup()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let intake = setup.intake
        let first = Task { try await intake.submit(deviceId: "d-first", fixes: Self.report("d-first", enters: false)) }
        try await Self.waitUntil { setup.store.heldNow }
        let waiting = Task { try await intake.submit(deviceId: "d-late", fixes: Self.report("d-late", enters: false)) }
        try await Self.waitUntil { intake.pendingCount == 1 }
        let started = ContinuousClock.now
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(setup.store.heldNow, "the batch under way is still held")
        setup.store.release()
        #expect(try await first.value.events == 0)
        #expect(try await setup.runtime.fixes.latestFix(deviceId: "d-late") == nil)
        #expect(setup.store.writes.withLock { $0.count } == 1)
    }

    @Test(
        "with tracing on, a batch is a trace of its own (ingest.batch: its write and its evaluation inside), linked to the span of every report it carries"
    )
    func tracedBatch() async throws {
        let tracer = InMemoryTracer()
        let setup = try await Self.setup(tracer: tracer)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let intake = setup.intake
        let first = Task { try await intake.submit(deviceId: "d-first", fixes: Self.report("d-first", enters: false)) }
        try await Self.waitUntil { setup.store.heldNow }
        var reports: [Task<FixIntake.Outcome, any Error>] = []
        for n in 0..<3 {
            reports.append(
                Task {
                    try await tracer.withSpan("request \(n)") { _ in
                        try await intake.submit(deviceId: "d-\(n)", fixes: Self.report("d-\(n)", enters: true))
                    }
                })
        }
        try await Self.waitUntil { intake.pendingCount == 3 }
        setup.store.release()
        _ = try await first.value
        for report in reports { #expect(try await report.value.events == 1) }
        // A batch answers its reports inside its span, which ends just after.
        try await Self.waitUntil { tracer.finishedSpans.filter { $0.operationName == "ingest.batch" }.count >= 2 }

        let spans = tracer.finishedSpans
        let requests = spans.filter { $0.operationName.hasPrefix("request ") }
        #expect(requests.count == 3)
        let batches = spans.filter { $0.operationName == "ingest.batch" }
        #expect(batches.count == 2)
        let gathered = try #require(batches.first { $0.attributes["ingest.reports"]?.toSpanAttribute() == .int64(3) })
        #expect(gathered.parentSpanID == nil)
        #expect(!requests.contains { $0.traceID == gathered.traceID })
        let linked = Set(gathered.links.compactMap { $0.context.inMemorySpanContext?.spanID })
        #expect(linked == Set(requests.map(\.spanID)))
        let inside = spans.filter { $0.parentSpanID == gathered.spanID }.map(\.operationName)
        #expect(inside.sorted() == ["db.insert_fixes", "location.evaluate"])
    }

    @Test(
        "with two batches at once, a device's second report waits for the batch holding its first while another device's report starts a batch of its own"
    )
    func deviceInOneBatchAtATime() async throws {
        let setup = try await Self.setup(batches: 2)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let intake = setup.intake
        let first = Task { try await intake.submit(deviceId: "d-x", fixes: Self.report("d-x", enters: true)) }
        try await Self.waitUntil { setup.store.heldNow }
        // d-x again (leaving the region, later fixes), then d-y: d-y's batch runs while d-x's first is held.
        let again = Task {
            try await intake.submit(deviceId: "d-x", fixes: Self.report("d-x", enters: false, offset: 30))
        }
        try await Self.waitUntil { intake.pendingCount == 1 }
        let other = try await intake.submit(deviceId: "d-y", fixes: Self.report("d-y", enters: true))
        #expect(other.events == 1)
        #expect(setup.store.heldNow)
        #expect(setup.store.writes.withLock { $0 } == [["d-x"], ["d-y"]])
        setup.store.release()
        #expect(try await first.value.events == 1)
        // Evaluated after its first report: its own exit.
        #expect(try await again.value.events == 1)
        let events = try await setup.runtime.location.events(deviceId: "d-x", limit: 10) ?? []
        #expect(events.map(\.type).sorted() == ["region_enter", "region_exit"])
        #expect(setup.store.writes.withLock { $0 } == [["d-x"], ["d-y"], ["d-x"]])
    }

    @Test(
        "a batch stops at maximumFixes; a device whose report is left for the next batch has its later reports wait too"
    )
    func fullBatchKeepsOrder() async throws {
        // Reports of 2 fixes; at most 4 fixes a batch.
        let setup = try await Self.setup(maximumFixes: 4)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let intake = setup.intake
        let first = Task { try await intake.submit(deviceId: "d-first", fixes: Self.report("d-first", enters: false)) }
        try await Self.waitUntil { setup.store.heldNow }
        // Pending, in order: a (2), b1 (4: a and b1 exceed 4), b2 (2, would fit beside a but must follow b1).
        let a = Task { try await intake.submit(deviceId: "d-a", fixes: Self.report("d-a", enters: false)) }
        try await Self.waitUntil { intake.pendingCount == 1 }
        let b1 = Task {
            try await intake.submit(
                deviceId: "d-b",
                fixes: Self.report("d-b", enters: false) + Self.report("d-b", enters: true, offset: 1))
        }
        try await Self.waitUntil { intake.pendingCount == 2 }
        let b2 = Task { try await intake.submit(deviceId: "d-b", fixes: Self.report("d-b", enters: false, offset: 30)) }
        try await Self.waitUntil { intake.pendingCount == 3 }
        setup.store.release()
        _ = try await first.value
        _ = try await a.value
        #expect(try await b1.value.events == 1)
        // Evaluated after b1: its own exit.
        #expect(try await b2.value.events == 1)
        #expect(setup.store.writes.withLock { $0 } == [["d-first"], ["d-a"], ["d-b"], ["d-b"]])
    }

    @Test("storing a refused batch report by report stops at an outage: the reports after it fail with it, unwritten")
    func fallbackStopsAtOutage() async throws {
        let setup = try await Self.setup(refused: "d-bad", unavailableAlone: "d-down")
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let intake = setup.intake
        let first = Task { try await intake.submit(deviceId: "d-first", fixes: Self.report("d-first", enters: false)) }
        try await Self.waitUntil { setup.store.heldNow }
        let down = Task { try await intake.submit(deviceId: "d-down", fixes: Self.report("d-down", enters: false)) }
        try await Self.waitUntil { intake.pendingCount == 1 }
        let bad = Task { try await intake.submit(deviceId: "d-bad", fixes: Self.report("d-bad", enters: false)) }
        try await Self.waitUntil { intake.pendingCount == 2 }
        let ok = Task { try await intake.submit(deviceId: "d-ok", fixes: Self.report("d-ok", enters: false)) }
        try await Self.waitUntil { intake.pendingCount == 3 }
        setup.store.release()
        _ = try await first.value
        await #expect(throws: ObservedStore.Unavailable.self) { try await down.value }
        await #expect(throws: ObservedStore.Unavailable.self) { try await bad.value }
        await #expect(throws: ObservedStore.Unavailable.self) { try await ok.value }
        // The held write, the gathered one, then d-down alone; nothing after the outage.
        #expect(setup.store.writes.withLock { $0 } == [["d-first"], ["d-bad", "d-down", "d-ok"], ["d-down"]])
        #expect(try await setup.runtime.fixes.latestFix(deviceId: "d-ok") == nil)
    }
}
