/// Resolves an audience within one app to the stored keys of its devices, against each device's last fix.
public struct AudienceResolver: Sendable {
    let fixes: any FixStore
    let tags: (any DeviceTagSource)?

    public init(fixes: any FixStore, tags: (any DeviceTagSource)? = nil) {
        self.fixes = fixes
        self.tags = tags
    }

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
        case .tags(let wanted):
            guard let tags else { return [] }
            var kept: Set<String>?
            for tag in wanted {
                let carrying = Set(try await tags.devices(taggedWith: tag).filter { AppNamespace.app(of: $0) == app })
                kept = kept.map { $0.intersection(carrying) } ?? carrying
                if kept?.isEmpty == true { break }
            }
            return kept ?? []
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
