public import Essentials

/// A shared store's last-fix reads, coalesced: concurrent enrichments on one node read their devices' last fixes
/// in one query per batch instead of one each (`CoalescingLoader`). Nothing is cached, so a fix another node
/// acknowledged before an enrichment began is what that enrichment sees (the multi-node coherence rule).
public struct CoalescedFixStore: FixStore {
    let base: any FixStore
    let loader: CoalescingLoader<LocationFix>

    /// Wraps `base`; at most `maximumBatches` reads run at once (keep it below the database pool's size).
    public init(base: any FixStore, maximumBatches: Int = 4) {
        self.base = base
        loader = CoalescingLoader(maximumBatches: maximumBatches) { ids in
            try await base.latestFixes(deviceIds: ids)
        }
    }

    public func insert(_ fixes: [LocationFix]) async throws { try await base.insert(fixes) }

    public func insertReportingLatest(_ fixes: [LocationFix]) async throws -> [String: LocationFix] {
        try await base.insertReportingLatest(fixes)
    }

    public func latestFix(deviceId: String) async throws -> LocationFix? { try await loader.load(deviceId) }

    public func deleteDevice(_ deviceId: String) async throws -> Int { try await base.deleteDevice(deviceId) }

    /// Straight from the store, which keeps the last-fix index.
    public func lastPositions(
        inCells ranges: [ClosedRange<Int64>], fixedSince oldest: Double, accuracyAtMost maxAccuracy: Double
    ) async throws -> [DevicePosition] {
        try await base.lastPositions(inCells: ranges, fixedSince: oldest, accuracyAtMost: maxAccuracy)
    }

    public func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix] {
        try await base.latestFixes(deviceIds: deviceIds)
    }

    public func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
        try await base.fixes(deviceId: deviceId, after: after, before: before, limit: limit)
    }

    public func insertReportingPrior(_ fixes: [LocationFix]) async throws -> PriorFixes? {
        try await base.insertReportingPrior(fixes)
    }

    public func fix(deviceId: String, before: Double) async throws -> LocationFix? {
        try await base.fix(deviceId: deviceId, before: before)
    }

    public func expireFixes(takenAtOrBefore cutoff: Double) async throws -> Int {
        try await base.expireFixes(takenAtOrBefore: cutoff)
    }
}
