public import Essentials

/// Where a device is, as location intelligence knows it: the regions it is inside and, when it is inside a zone
/// classified home or work, which one. Enrichment offers it to the body template and reports it.
public struct DeviceContext: Sendable, Equatable {
    /// Ids of the regions the device is inside (custom, POI and zone regions).
    public var regions: [String]
    /// A readable name of the region it is in: a custom region's own id, else a POI region's POI name.
    public var region: String?
    /// `home` or `work` when inside a classified zone.
    public var zone: String?

    public init(regions: [String] = [], region: String? = nil, zone: String? = nil) {
        self.regions = regions
        self.region = region
        self.zone = zone
    }

    public var isEmpty: Bool { regions.isEmpty && zone == nil }
}

extension DeviceContext: JSONObjectRepresentable {
    public func writeJSON(into object: inout JSONObjectWriter) {
        object.field("regions", strings: regions)
        object.field("region", region)
        object.field("zone", zone)
    }
}

/// Gives the enricher a device's context (location intelligence implements it).
public protocol DeviceContextProvider: Sendable {
    /// The device's context, or nil when nothing is known.
    func context(deviceId: String) async throws -> DeviceContext?
    /// The known contexts of many devices at once (a batch of deliveries); a device without one is left out.
    func contexts(deviceIds: [String]) async throws -> [String: DeviceContext]
    /// What `context` would answer without a read (`.some(nil)`: known to have none), nil when it is not known.
    func cachedContext(deviceId: String) -> DeviceContext??
}

extension DeviceContextProvider {
    /// A provider without a cache knows nothing without a read.
    public func cachedContext(deviceId: String) -> DeviceContext?? { nil }

    /// One device after another.
    public func contexts(deviceIds: [String]) async throws -> [String: DeviceContext] {
        var found: [String: DeviceContext] = [:]
        for id in deviceIds { found[id] = try await context(deviceId: id) }
        return found
    }
}

/// Contexts read once for a batch of deliveries: each enrichment of the batch takes its device's from here, with
/// no lock or read per device.
public struct PrefetchedContexts: DeviceContextProvider {
    let contexts: [String: DeviceContext]

    public init(_ contexts: [String: DeviceContext]) { self.contexts = contexts }

    public func context(deviceId: String) async throws -> DeviceContext? { contexts[deviceId] }

    public func cachedContext(deviceId: String) -> DeviceContext?? { .some(contexts[deviceId]) }
}

/// A device's last fix and its context, read together.
public struct DeviceSnapshot: Sendable {
    public var fix: LocationFix?
    public var context: DeviceContext?

    public init(fix: LocationFix?, context: DeviceContext?) {
        self.fix = fix
        self.context = context
    }
}

/// Reads a device's last fix and its context in one trip (a shared database, where each read is a round trip).
/// What it returns was read after it was asked for: a fix acknowledged by any node before is in it.
public protocol DeviceSnapshotProvider: Sendable {
    func snapshot(deviceId: String) async throws -> DeviceSnapshot
}
