import Delivery
import Essentials
import Foundation
import Logging

/// The retain stage: open pushes idle too long are closed, and what the outbox no longer needs is removed in small
/// batches, each its own transaction, so sending never waits long behind it: pending deliveries of cancelled pushes
/// become `cancelled`, and pushes done for longer than the retention period are deleted (deliveries, devices,
/// receipts, then the push).
extension DeliveryEngine {
    /// Rows one retention transaction removes at most.
    static let retainBatch = 2_000

    /// How often pushes past the retention period (and open pushes left idle) are looked for: a tenth of the
    /// shorter period, from 0.1 s to 60 s.
    var retainInterval: Duration {
        .milliseconds(Int64(min(60, max(0.1, min(settings.retention, settings.openPushIdle) / 10)) * 1000))
    }

    func retainLoop() async {
        var failing = false
        while !isStopping {
            let seen = rendezvous.generation(Self.retainKey)
            do {
                try await closeIdle()
                try await sweepCancelled()
                let deleted = try await deleteExpired()
                if deleted > 0 { logger.info("pushes past their retention deleted", metadata: ["rows": "\(deleted)"]) }
                if failing { logger.notice("retention resumed: the store answers again") }
                failing = false
            } catch {
                if !failing {
                    logger.warning(
                        "retention waits: the store did not answer; tried again later", metadata: ["error": "\(error)"])
                }
                failing = true
            }
            _ = await rendezvous.wait(Self.retainKey, since: seen, timeout: retainInterval)
        }
    }

    /// Turns the pending deliveries of cancelled pushes `cancelled`, a batch at a time.
    func sweepCancelled() async throws {
        var swept = 0
        while !isStopping {
            let now = clock.now().timeIntervalSince1970
            let batch = try await bounded {
                try await self.outbox.sweepCancelled(at: now, limit: Self.retainBatch)
            }
            swept += batch
            if batch < Self.retainBatch { break }
            await Task.yield()
        }
        if swept > 0 {
            logger.info("deliveries of cancelled pushes cancelled", metadata: ["count": "\(swept)"])
            rendezvous.notify(Self.callbackKey)
        }
    }

    /// Deletes what is past the retention period, a batch at a time; returns how many rows went.
    func deleteExpired() async throws -> Int {
        var deleted = 0
        let before = clock.now().timeIntervalSince1970 - settings.retention
        while !isStopping {
            let batch = try await bounded { try await self.outbox.retain(before: before, limit: Self.retainBatch) }
            if batch == 0 { break }
            deleted += batch
            await Task.yield()
        }
        return deleted
    }
}
