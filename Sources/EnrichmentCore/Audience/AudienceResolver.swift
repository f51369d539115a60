/// Resolves an audience within one app to the stored keys of its devices, against each device's last fix.
public struct AudienceResolver: Sendable {
    let fixes: any FixStore

    public init(fixes: any FixStore) { self.fixes = fixes }

    /// The devices of `app` (stored keys, `AppNamespace`) the audience holds at `now` (epoch seconds).
    public func resolve(_ audience: Audience, app: String, now: Double) async throws -> Set<String> {
        switch audience {
        case .near(let center, let radius, let maxFixAge, let maxAccuracy):
            let candidates = try await fixes.lastFixes(inCells: LastFixCells.ranges(center: center, radius: radius))
            var found = Set<String>()
            let oldest = now - maxFixAge
            for fix in candidates
            where fix.fixTime >= oldest && (fix.horizontalAccuracy ?? 0) <= maxAccuracy
                && AppNamespace.app(of: fix.deviceId) == app && center.distance(to: fix.coordinate) <= radius
            {
                found.insert(fix.deviceId)
            }
            return found
        case .any(let parts):
            var union = Set<String>()
            for part in parts { union.formUnion(try await resolve(part, app: app, now: now)) }
            return union
        case .all(let parts):
            var kept: Set<String>?
            var removed = Set<String>()
            for part in parts {
                if case .not(let inner) = part {
                    removed.formUnion(try await resolve(inner, app: app, now: now))
                } else {
                    let members = try await resolve(part, app: app, now: now)
                    kept = kept.map { $0.intersection(members) } ?? members
                }
            }
            return (kept ?? []).subtracting(removed)
        case .not:
            // Refused by the parser outside `all`; nothing to take away from.
            return []
        }
    }
}
