public import Essentials
import Foundation

/// One reported position of a device.
public struct LocationFix: Sendable, Equatable {
    public var deviceId: String
    public var coordinate: Coordinate
    /// When the device took the fix, epoch seconds (may be fractional).
    public var fixTime: Double
    /// Horizontal accuracy in metres, when reported.
    public var horizontalAccuracy: Double?
    /// OpenLocate `location_context` (e.g. `regular`, `visit_entry`), when reported.
    public var context: String?
    /// When the service stored it, epoch seconds.
    public var receivedAt: Double
    /// The rest of OpenLocate's fields as reported and validated (`speed`, `wifi_ssid`, `is_charging`, …), as a
    /// JSON object; nil when the fix had none.
    public var extras: JSONValue?

    public init(
        deviceId: String, coordinate: Coordinate, fixTime: Double, horizontalAccuracy: Double? = nil,
        context: String? = nil, receivedAt: Double, extras: JSONValue? = nil
    ) {
        self.extras = extras
        self.deviceId = deviceId
        self.coordinate = coordinate
        self.fixTime = fixTime
        self.horizontalAccuracy = horizontalAccuracy
        self.context = context
        self.receivedAt = receivedAt
    }
}

/// Stores location fixes; the last fix is the one with the newest fix time, not the newest arrival.
public protocol FixStore: Sendable {
    /// Stores fixes durably before returning; a fix with the same device and fix time replaces the old one (the
    /// same fix sent again, equal but for its arrival, is left as it is: it keeps its first `receivedAt`).
    func insert(_ fixes: [LocationFix]) async throws
    /// The fix with the newest fix time for a device, if any.
    func latestFix(deviceId: String) async throws -> LocationFix?
    /// Removes everything stored for a device; returns how many fixes were removed.
    func deleteDevice(_ deviceId: String) async throws -> Int
    /// The last fix of each listed device that has one, read together (one trip to storage for a batch).
    func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix]
    /// A device's fixes with a fix time after `after` and before `before`, oldest first, at most `limit` (the
    /// visit detector's read).
    func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix]
    /// Removes every fix taken at or before `cutoff` (retention); returns how many went.
    func expireFixes(takenAtOrBefore cutoff: Double) async throws -> Int
    /// The device's newest fix with a fix time before `before` (where it was before a batch, for §4.3).
    func fix(deviceId: String, before: Double) async throws -> LocationFix?
    /// Stores fixes as `insert` does and tells, for each device of the batch, its newest fix older than the batch's
    /// first one of that device (nil: it had none): what region evaluation and the visit detector would otherwise
    /// read back. Nil when the store does not tell.
    func insertReportingPrior(_ fixes: [LocationFix]) async throws -> PriorFixes?
    /// Stores fixes as `insert` does and tells the devices whose newest stored fix is now one of them
    /// (`PriorFixes.latest`); empty when the store does not tell.
    func insertReportingLatest(_ fixes: [LocationFix]) async throws -> [String: LocationFix]
    /// The position of every device whose last fix lies in a cell (`LastFixCells`) of one of `ranges`, was taken
    /// at or after `oldest` and has an accuracy (none counts as 0) of at most `maxAccuracy` metres: the candidates
    /// of a `near` audience.
    func lastPositions(
        inCells ranges: [ClosedRange<Int64>], fixedSince oldest: Double, accuracyAtMost maxAccuracy: Double
    ) async throws -> [DevicePosition]
    /// The device's last fix when it is known without a read (`.some(nil)`: known to have none), nil when it is not.
    func cachedLatestFix(deviceId: String) -> LocationFix??
}

/// Where a device was at its last fix (audiences).
public struct DevicePosition: Sendable, Equatable {
    public var deviceId: String
    public var coordinate: Coordinate

    public init(deviceId: String, coordinate: Coordinate) {
        self.deviceId = deviceId
        self.coordinate = coordinate
    }
}

/// A store that keeps no last-fix index cannot resolve audiences.
public struct AudiencesUnsupported: Error, CustomStringConvertible {
    public var description: String { "this store keeps no index of last fixes: audiences need SQLite or PostgreSQL" }
}

/// For each device of a batch just stored, its newest fix before the batch (nil: none).
public struct PriorFixes: Sendable {
    public var byDevice: [String: LocationFix?]
    /// The devices whose newest stored fix is now one of the batch, as the store knows it after the insert (a store
    /// that cannot tell says nothing): the last-fix cache remembers them without reading them back.
    public var latest: [String: LocationFix]

    public init(_ byDevice: [String: LocationFix?] = [:], latest: [String: LocationFix] = [:]) {
        self.byDevice = byDevice
        self.latest = latest
    }
}

extension FixStore {
    /// Test doubles and read-only views keep no last-fix index.
    public func lastPositions(
        inCells ranges: [ClosedRange<Int64>], fixedSince oldest: Double, accuracyAtMost maxAccuracy: Double
    ) async throws -> [DevicePosition] {
        throw AudiencesUnsupported()
    }

    /// Stores that keep nothing for long (test doubles, read-only views) have nothing to expire.
    public func expireFixes(takenAtOrBefore cutoff: Double) async throws -> Int { 0 }

    /// Stores that cannot tell insert and say nothing.
    public func insertReportingPrior(_ fixes: [LocationFix]) async throws -> PriorFixes? {
        try await insert(fixes)
        return nil
    }

    /// Stores that cannot tell insert and say nothing.
    public func insertReportingLatest(_ fixes: [LocationFix]) async throws -> [String: LocationFix] {
        try await insert(fixes)
        return [:]
    }

    /// Through the newest fix, for stores that hold one per device (test doubles, read-only views).
    public func fix(deviceId: String, before: Double) async throws -> LocationFix? {
        guard let latest = try await latestFix(deviceId: deviceId) else { return nil }
        return latest.fixTime < before ? latest : nil
    }
}

extension LocationFix {
    /// The Wi-Fi network name the fix reports (OpenLocate `wifi_ssid`).
    public var wifiSSID: String? { extras?["wifi_ssid"]?.stringValue }
    /// The Wi-Fi access point the fix reports (OpenLocate `wifi_bssid`), lower-case.
    public var wifiBSSID: String? { extras?["wifi_bssid"]?.stringValue?.lowercased() }
}

extension FixStore {
    /// A store without a cache knows nothing without a read.
    public func cachedLatestFix(deviceId: String) -> LocationFix?? { nil }

    /// One lookup per device (for stores that have nothing better).
    public func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix] {
        var found: [String: LocationFix] = [:]
        for id in Set(deviceIds) {
            if let fix = try await latestFix(deviceId: id) { found[id] = fix }
        }
        return found
    }
}

/// The last fixes of a batch of devices, read beforehand: the enricher of a batch reads them without a trip to
/// storage. A device that is not in the batch has no fix here.
public struct PrefetchedFixes: FixStore {
    let fixes: [String: LocationFix]

    public init(_ fixes: [String: LocationFix]) { self.fixes = fixes }

    /// True when the device has a fix here.
    public func has(_ deviceId: String) -> Bool { fixes[deviceId] != nil }

    public func insert(_ fixes: [LocationFix]) async throws {
        preconditionFailure("PrefetchedFixes is read-only")
    }

    public func latestFix(deviceId: String) async throws -> LocationFix? { fixes[deviceId] }

    public func deleteDevice(_ deviceId: String) async throws -> Int {
        preconditionFailure("PrefetchedFixes is read-only")
    }

    public func latestFixes(deviceIds: [String]) async throws -> [String: LocationFix] {
        fixes.filter { deviceIds.contains($0.key) }
    }

    public func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
        fixes[deviceId].map { $0.fixTime > after && $0.fixTime < before ? [$0] : [] } ?? []
    }
}
/// A batch of fixes holds each report's fixes one after another: a pass over it that needs each device once can
/// look a device up once per run of its fixes rather than once per fix (a report of 100 fixes: one hash, not 100).
extension Collection where Element == LocationFix {
    /// Calls `body` with each run of consecutive fixes of one device, in order (a device may have several runs).
    public func forEachDeviceRun(_ body: (_ deviceId: String, _ fixes: SubSequence) throws -> Void) rethrows {
        var start = startIndex
        while start != endIndex {
            let device = self[start].deviceId
            var end = index(after: start)
            while end != endIndex, self[end].deviceId == device { formIndex(after: &end) }
            try body(device, self[start..<end])
            start = end
        }
    }

    /// Each device's newest fix; of its fixes with the same time, the last one (as a store keeps it).
    public func newestByDevice() -> [String: LocationFix] {
        var newest: [String: LocationFix] = [:]
        forEachDeviceRun { device, fixes in
            var best = fixes[fixes.startIndex]
            for fix in fixes.dropFirst() where fix.fixTime >= best.fixTime { best = fix }
            if best.fixTime >= (newest[device]?.fixTime ?? -.infinity) { newest[device] = best }
        }
        return newest
    }

    /// Each device's earliest fix time.
    public func earliestTimeByDevice() -> [String: Double] {
        var earliest: [String: Double] = [:]
        forEachDeviceRun { device, fixes in
            let time = fixes.lazy.map(\.fixTime).min() ?? .infinity
            earliest[device] = Swift.min(earliest[device] ?? .infinity, time)
        }
        return earliest
    }
}
