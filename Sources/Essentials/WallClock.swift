public import Foundation

/// The source of "now" for staleness and fix age; injected so rules are tested at exact boundaries.
public protocol WallClock: Sendable {
    /// The current instant.
    func now() -> Date
}

/// The system wall clock.
public struct SystemWallClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock that always reads the same instant (tests, `--now`).
public struct FixedWallClock: WallClock {
    public var instant: Date
    public init(_ instant: Date) { self.instant = instant }
    public init(epochSeconds: Double) { self.instant = Date(timeIntervalSince1970: epochSeconds) }
    public func now() -> Date { instant }
}
