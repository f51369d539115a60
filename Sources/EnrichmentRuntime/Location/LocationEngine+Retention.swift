import EnrichmentCore
import Essentials
import Foundation
import LocationCore
import Logging

// LocationEngine's retention of fixes, visits and events, and the background work it runs (webhooks, regions of
// other nodes, the daily retention pass).
extension LocationEngine {
    /// What one retention pass removed.
    public struct RetentionReport: Sendable, Equatable {
        public var visits: Int
        public var events: Int
        public var fixes: Int
    }

    /// Removes fixes, visits and events captured at or before `now − retention_days` (docs/LOCATION-RULES.md §5,
    /// with the intended per-visit ZOI update).
    public func runRetention(now: Double) async throws -> RetentionReport {
        let cutoff = now - Double(settings.retentionDays) * 86_400
        let (visits, events) = try await store.expire(recordedAtOrBefore: cutoff) { zois, expiring, remaining in
            FIGMM.removeVisits(expiring, from: zois, remaining: remaining)
        }
        let fixes = try await self.fixes.expireFixes(takenAtOrBefore: cutoff)
        contexts.forgetAll()
        return RetentionReport(visits: visits, events: events, fixes: fixes)
    }

    /// Runs retention once a day until cancelled (the first pass one day after start, as the SDK's first
    /// activation cleans nothing); sends queued webhook events meanwhile.
    /// `followRegions`: other nodes change regions too (PostgreSQL); they are read again when the signal says so, and
    /// at least every `interval`.
    public func runBackgroundWork(followRegions: ChangeSignal?, interval: Duration = .seconds(1)) async {
        await withTaskGroup(of: Void.self) { group in
            if let webhook { group.addTask { await webhook.run() } }
            if let signal = followRegions {
                group.addTask {
                    while !Task.isCancelled {
                        let seen = signal.generation
                        await signal.wait(since: seen, timeout: interval)
                        if Task.isCancelled { break }
                        try? await self.reloadRegions()
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(86_400))
                    if Task.isCancelled { break }
                    do {
                        let report = try await self.runRetention(now: self.clock.now().timeIntervalSince1970)
                        self.logger.info(
                            "location retention ran",
                            metadata: [
                                "visits": "\(report.visits)", "events": "\(report.events)", "fixes": "\(report.fixes)",
                            ])
                    } catch {
                        self.logger.error(
                            "location retention failed; retrying tomorrow", metadata: ["error": "\(error)"])
                    }
                }
            }
            await group.waitForAll()
        }
    }
}
