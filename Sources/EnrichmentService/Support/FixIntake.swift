import EnrichmentCore
import EnrichmentRuntime
import Logging
import Synchronization
import Tracing

/// Fix reports (`POST /v1/devices/{id}/locations`) stored and evaluated in batches: reports arriving while a batch
/// is under way gather for the next one, which stores all their fixes in one statement (one commit) and evaluates
/// regions and visits for all their devices in one transaction. A report is answered once its batch has done both,
/// exactly as if it had been alone: its fixes committed before the answer, its own devices' events counted.
///
/// A device is in at most one batch at a time, in one report (its next report waits until the batch holding it
/// is done, even when another batch could start meanwhile): each report's events are its own, and a device's
/// reports are stored and evaluated in their order. A batch holds at most `maximumFixes` fixes (or one report
/// larger than that). When the database refuses a batch's statement for its data (`StorageHealth.refusesData`,
/// not an outage), each report is stored on its own, so that only the one at fault fails. A report whose request
/// is cancelled (its deadline) is answered at once: 200 with a `location_error` when its fixes are already
/// committed, else a cancellation (its batch may still store them, as a cancelled query may commit).
final class FixIntake: Sendable {
    /// What a stored report's batch said about it: its events, or why regions and visits were not evaluated.
    struct Outcome: Sendable {
        var events: Int?
        var locationError: String?
    }

    private struct Report: Sendable {
        var id: UInt64
        var deviceId: String
        var fixes: [LocationFix]
        /// The request's span, linked from the batch's (with tracing on).
        var link: InstrumentationContext?
    }

    private struct State: ~Copyable {
        var next: UInt64 = 0
        var pending: [Report] = []
        /// Every report not answered yet (pending or in a batch), by id: whoever removes one answers it.
        var waiting: [UInt64: CheckedContinuation<Outcome, any Error>] = [:]
        /// Reports whose fixes are committed (their batch is evaluating them).
        var committed: Set<UInt64> = []
        /// The devices of the batches under way.
        var inFlight: Set<String> = []
        var running = 0
    }

    private let state = Mutex(State())
    let fixes: any FixStore
    let location: LocationEngine
    let spans: SpanRecorder
    /// The bound of a batch's database work (`ENRICH_DATABASE_TIMEOUT` with PostgreSQL), or none.
    let timeout: Duration?
    let maximumBatches: Int
    let maximumFixes: Int
    let logger: Logger

    init(
        fixes: any FixStore, location: LocationEngine, spans: SpanRecorder, timeout: Duration?,
        maximumBatches: Int = 2, maximumFixes: Int = 10_000, logger: Logger
    ) {
        self.fixes = fixes
        self.location = location
        self.spans = spans
        self.timeout = timeout
        self.maximumBatches = max(1, maximumBatches)
        self.maximumFixes = max(1, maximumFixes)
        self.logger = logger
    }

    /// Reports waiting for a batch (not in one yet): what a test waits for before it releases a held batch, so
    /// that the order of reports is set by the test, not by timing.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Stores `fixes` (all of one device) and evaluates them in the next batch.
    func submit(deviceId: String, fixes: [LocationFix]) async throws -> Outcome {
        let link = spans.tracer != nil ? InstrumentationContext.current : nil
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                enum Next {
                    case cancelled
                    case wait
                    case start([Report])
                }
                let next: Next = state.withLock { state in
                    guard !Task.isCancelled else { return .cancelled }
                    state.waiting[id] = continuation
                    state.pending.append(Report(id: id, deviceId: deviceId, fixes: fixes, link: link))
                    guard state.running < maximumBatches else { return .wait }
                    let batch = take(&state)
                    // Nothing to take: every pending device is in a batch under way, which takes them next.
                    guard !batch.isEmpty else { return .wait }
                    state.running += 1
                    return .start(batch)
                }
                switch next {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .wait: break
                // Detached: the batch serves many requests, none of whose trace or app it belongs to.
                case .start(let batch): Task.detached { await self.run(batch) }
                }
            }
        } onCancel: {
            let (continuation, committed) = state.withLock { state in
                state.pending.removeAll { $0.id == id }
                return (state.waiting.removeValue(forKey: id), state.committed.remove(id) != nil)
            }
            guard committed else { return continuation?.resume(throwing: CancellationError()) ?? () }
            continuation?.resume(
                returning: Outcome(
                    events: nil,
                    locationError:
                        "the fixes are stored; regions and visits were still being evaluated when the request ended"
                ))
        }
    }

    /// The next batch from what is pending, in arrival order: one report per device, none of a device in a batch
    /// under way (whose devices it then holds), up to `maximumFixes` fixes.
    private func take(_ state: inout State) -> [Report] {
        var batch: [Report] = []
        var left: [Report] = []
        var count = 0
        // Devices with a report left for later: their later reports wait too, so a device's reports keep their order.
        var blocked: Set<String> = []
        for report in state.pending {
            let fits = batch.isEmpty || count + report.fixes.count <= maximumFixes
            if fits, !state.inFlight.contains(report.deviceId), !blocked.contains(report.deviceId) {
                state.inFlight.insert(report.deviceId)
                batch.append(report)
                count += report.fixes.count
            } else {
                blocked.insert(report.deviceId)
                left.append(report)
            }
        }
        state.pending = left
        return batch
    }

    /// The reports' fixes are committed: a request that ends now is answered that they are stored.
    private func markCommitted(_ reports: [Report]) {
        state.withLock { state in
            for report in reports where state.waiting[report.id] != nil { state.committed.insert(report.id) }
        }
    }

    /// Answers a report unless it was answered already (cancelled).
    private func answer(_ id: UInt64, _ result: Result<Outcome, any Error>) {
        state.withLock { state in
            state.committed.remove(id)
            return state.waiting.removeValue(forKey: id)
        }?.resume(with: result)
    }

    /// Runs `batch`, then what gathered meanwhile, until nothing it may take is pending (what waits for a device in
    /// another batch under way is taken by that one).
    private func run(_ first: [Report]) async {
        var batch = first
        while true {
            await process(batch)
            let next: [Report]? = state.withLock { state in
                for report in batch { state.inFlight.remove(report.deviceId) }
                let next = take(&state)
                guard next.isEmpty else { return next }
                state.running -= 1
                return nil
            }
            guard let next else { return }
            batch = next
        }
    }

    /// `work` within the batch's bound; `DatabaseTimeout` when it is reached.
    private func bounded<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let timeout else { return try await work() }
        return try await RequestDeadlines.shared.bounded(within: timeout, work)
    }

    private func process(_ batch: [Report]) async {
        guard let tracer = spans.tracer else { return await store(batch) }
        await tracer.withSpan("ingest.batch", context: .topLevel) { span in
            for report in batch { if let link = report.link { span.addLink(SpanLink(context: link, attributes: [:])) } }
            span.attributes["ingest.reports"] = batch.count
            span.attributes["fixes.count"] = batch.reduce(0) { $0 + $1.fixes.count }
            await store(batch)
        }
    }

    /// Stores the batch's fixes (each report alone when the database refuses the whole for its data), then
    /// evaluates what was stored.
    private func store(_ batch: [Report]) async {
        let evaluates = location.evaluatesFixes
        let fixes = self.fixes
        @Sendable func insert(_ batch: [LocationFix]) async throws -> PriorFixes? {
            guard evaluates else {
                try await fixes.insert(batch)
                return nil
            }
            return try await fixes.insertReportingPrior(batch)
        }
        var stored = batch
        var prior: PriorFixes?
        do {
            let all = batch.flatMap(\.fixes)
            prior = try await spans.run("db.insert_fixes", kind: .client) { span in
                span?.attributes["fixes.count"] = all.count
                return try await bounded { try await insert(all) }
            }
        } catch {
            guard batch.count > 1, StorageHealth.refusesData(error) else {
                for report in batch { answer(report.id, .failure(error)) }
                return
            }
            logger.warning(
                "a batch of fix reports was refused for its data; storing each report alone",
                metadata: ["reports": "\(batch.count)", "error": "\(error)"])
            stored = []
            var priors: [String: LocationFix?] = [:]
            var unavailable: (any Error)?
            for report in batch {
                // The database gone meanwhile: the rest fail with it, rather than each waiting out the bound.
                if let unavailable {
                    answer(report.id, .failure(unavailable))
                    continue
                }
                do {
                    let alone = try await bounded { try await insert(report.fixes) }
                    priors.merge(alone?.byDevice ?? [:]) { first, _ in first }
                    stored.append(report)
                    markCommitted([report])
                } catch {
                    if !StorageHealth.refusesData(error) { unavailable = error }
                    answer(report.id, .failure(error))
                }
            }
            prior = evaluates ? PriorFixes(priors) : nil
        }
        guard !stored.isEmpty else { return }
        markCommitted(stored)
        // Regions and visits after the commit: a failure here is reported, and the fixes stay stored.
        let location = self.location
        let all = stored.flatMap(\.fixes)
        let evaluatedPrior = prior
        do {
            let evaluation = try await spans.run("location.evaluate") { _ in
                try await bounded { try await location.evaluate(ingested: all, prior: evaluatedPrior) }
            }
            if let failure = evaluation.visitFailures.values.first {
                logger.error(
                    "visit detection failed",
                    metadata: ["devices": "\(evaluation.visitFailures.count)", "error": "\(failure)"])
            }
            for report in stored {
                var outcome = Outcome(events: evaluation.events[report.deviceId] ?? 0)
                if let failure = evaluation.visitFailures[report.deviceId] {
                    // Cancelled by the bound: say so, not "CancellationError".
                    var why: any Error = failure
                    if failure is CancellationError, let timeout { why = DatabaseTimeout(timeout: timeout) }
                    outcome.locationError = "visits were not detected for this batch: \(why)"
                }
                answer(report.id, .success(outcome))
            }
        } catch {
            logger.error(
                "location evaluation failed", metadata: ["reports": "\(stored.count)", "error": "\(error)"])
            let message = "regions and visits were not evaluated for this batch: \(error)"
            for report in stored { answer(report.id, .success(Outcome(events: nil, locationError: message))) }
        }
    }
}
