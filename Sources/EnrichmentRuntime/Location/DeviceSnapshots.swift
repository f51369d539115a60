public import EnrichmentCore
import Essentials
public import LocationCore

/// The last fixes and contexts of devices on a shared database, read in one statement per batch: concurrent
/// enrichments on a node join the next batch that has not been sent (`CoalescingLoader`), so each sees every fix
/// acknowledged by any node before it began, and an enrichment costs a fraction of one round trip.
public final class DeviceSnapshots: DeviceSnapshotProvider, Sendable {
    public typealias Read =
        @Sendable ([String]) async throws -> (
            fixes: [String: LocationFix], states: [String: DeviceRegionState], zones: [String: [ZoneOfInterest]]
        )

    let loader: CoalescingLoader<DeviceSnapshot>

    /// `maximumBatches` statements at most run at once; keys arriving meanwhile wait for the next batch (fewer,
    /// larger batches cost the node less CPU per enrichment than many small ones, at a little latency).
    public init(maximumBatches: Int, read: @escaping Read) {
        loader = CoalescingLoader(maximumBatches: maximumBatches) { ids in
            let (fixes, states, zones) = try await read(ids)
            var snapshots: [String: DeviceSnapshot] = [:]
            for id in ids {
                let context = states[id].map { DeviceContexts.context($0, zones: zones[id] ?? []) }
                snapshots[id] = DeviceSnapshot(fix: fixes[id], context: context?.isEmpty == false ? context : nil)
            }
            return snapshots
        }
    }

    public func snapshot(deviceId: String) async throws -> DeviceSnapshot {
        try await loader.load(deviceId) ?? DeviceSnapshot(fix: nil, context: nil)
    }
}
