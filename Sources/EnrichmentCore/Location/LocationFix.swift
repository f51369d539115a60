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

    public init(
        deviceId: String, coordinate: Coordinate, fixTime: Double, horizontalAccuracy: Double? = nil,
        context: String? = nil, receivedAt: Double
    ) {
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
    /// Stores fixes durably before returning; a fix with the same device and fix time replaces the old one.
    func insert(_ fixes: [LocationFix]) async throws
    /// The fix with the newest fix time for a device, if any.
    func latestFix(deviceId: String) async throws -> LocationFix?
    /// Removes everything stored for a device; returns how many fixes were removed.
    func deleteDevice(_ deviceId: String) async throws -> Int
}
