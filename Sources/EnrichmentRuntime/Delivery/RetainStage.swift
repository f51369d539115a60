import Delivery
import Essentials
import Foundation
import Logging

/// The retain stage: open pushes idle too long are closed, and what the outbox no longer needs is removed in small
/// batches, each its own transaction, so sending never waits long behind it: pending deliveries of cancelled pushes
/// become `cancelled`, and pushes done for longer than the retention period are deleted (deliveries, devices,
/// receipts, then the push).
struct RetainStage: Sendable {
    let context: PipelineContext

    /// Rows one retention transaction removes at most.
    static let batch = 2_000

    /// How often pushes past the retention period (and open pushes left idle) are looked for: a tenth of the
    /// shorter period, from 0.1 s to 60 s.
    var interval: Duration {
        .milliseconds(
            Int64(min(60, max(0.1, min(context.settings.retention, context.settings.openPushIdle) / 10)) * 1000))
    }

    func run() async {
        var failing = false
        while !context.isStopping {
            let seen = context.rendezvous.generation(PipelineContext.retainKey)
            do {
                try await closeIdle()
                try await sweepCancelled()
                let deleted = try await deleteExpired()
                if deleted > 0 {
                    context.logger.info("pushes past their retention deleted", metadata: ["rows": "\(deleted)"])
                }
                if failing { context.logger.notice("retention resumed: the store answers again") }
                failing = false
            } catch {
                if !failing {
                    context.logger.warning(
                        "retention waits: the store did not answer; tried again later", metadata: ["error": "\(error)"])
                }
                failing = true
            }
            _ = await context.rendezvous.wait(PipelineContext.retainKey, since: seen, timeout: interval)
        }
    }

    /// Turns the pending deliveries of cancelled pushes `cancelled`, a batch at a time.
    func sweepCancelled() async throws {
        var swept = 0
        while !context.isStopping {
            let now = context.now
            let batch = try await context.bounded {
                try await context.outbox.sweepCancelled(at: now, limit: Self.batch)
            }
            swept += batch
            if batch < Self.batch { break }
            await Task.yield()
        }
        if swept > 0 {
            context.logger.info("deliveries of cancelled pushes cancelled", metadata: ["count": "\(swept)"])
            context.rendezvous.notify(PipelineContext.callbackKey)
        }
    }

    /// Deletes what is past the retention period, a batch at a time; returns how many rows went.
    func deleteExpired() async throws -> Int {
        var deleted = 0
        let before = context.now - context.settings.retention
        while !context.isStopping {
            let batch = try await context.bounded { try await context.outbox.retain(before: before, limit: Self.batch) }
            if batch == 0 { break }
            deleted += batch
            await Task.yield()
        }
        return deleted
    }

    /// Closes the open pushes idle for longer than `settings.openPushIdle`.
    func closeIdle() async throws {
        let now = context.now
        let closed = try await context.bounded { try await context.outbox.closeIdle(now: now) }
        guard !closed.isEmpty else { return }
        context.logger.notice(
            "open pushes closed: no device was added to them for ENRICH_OPEN_PUSH_IDLE seconds",
            metadata: ["push_ids": "\(closed.joined(separator: ","))", "idle_s": "\(context.settings.openPushIdle)"])
        for id in closed { context.rendezvous.notify(id) }
        context.rendezvous.notify(PipelineContext.callbackKey)
    }
}
