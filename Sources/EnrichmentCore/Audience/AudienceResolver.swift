/// Resolves an audience within one app to the stored keys of its devices, against each device's last fix.
public struct AudienceResolver: Sendable {
    let fixes: any FixStore
    let tags: (any DeviceTagSource)?
    let history: (any AudienceHistory)?

    public init(
        fixes: any FixStore, tags: (any DeviceTagSource)? = nil, history: (any AudienceHistory)? = nil
    ) {
        self.fixes = fixes
        self.tags = tags
        self.history = history
    }

    /// The devices of `app` (stored keys, `AppNamespace`) the audience holds at `now` (epoch seconds).
    public func resolve(_ audience: Audience, app: String, now: Double) async throws -> Set<String> {
        switch audience {
        case .near(let center, let radius, let maxFixAge, let maxAccuracy):
            // One read, so one snapshot: a device whose fix moves within the circle is found once, wherever.
            let positions = try await fixes.lastPositions(
                inCells: LastFixCells.ranges(center: center, radius: radius), fixedSince: now - maxFixAge,
                accuracyAtMost: maxAccuracy)
            var found = Set<String>(minimumCapacity: positions.count)
            for position in positions
            where AppNamespace.belongs(position.deviceId, to: app) && center.distance(to: position.coordinate) <= radius
            {
                found.insert(position.deviceId)
            }
            return found
        case .tags(let wanted):
            guard let tags else { return [] }
            return Set(try await tags.devices(taggedWithAll: wanted).filter { AppNamespace.belongs($0, to: app) })
        case .region(let storedId, let area, let rule):
            var found = Set<String>()
            if rule != .wifi {
                switch area {
                case .circle(let center, let radius):
                    found = try await resolve(
                        .near(
                            center: center, radius: radius, maxFixAge: Audience.defaultMaxFixAge,
                            maxAccuracy: Audience.defaultMaxAccuracy), app: app, now: now)
                case .polygon:
                    // As `near` reads a circle: the cells of the polygon's box, then the even-odd rule on each fix.
                    let positions = try await fixes.lastPositions(
                        inCells: area.cellRanges, fixedSince: now - Audience.defaultMaxFixAge,
                        accuracyAtMost: Audience.defaultMaxAccuracy)
                    for position in positions
                    where AppNamespace.belongs(position.deviceId, to: app) && area.contains(position.coordinate) {
                        found.insert(position.deviceId)
                    }
                }
            }
            if rule != .circle {
                guard let history else { throw AudiencesUnsupported() }
                for device in try await history.devicesInside(region: storedId)
                where AppNamespace.belongs(device, to: app) {
                    found.insert(device)
                }
            }
            return found
        case .zoi(let period, let area):
            guard let history else { throw AudiencesUnsupported() }
            let zones = try await history.zoneCentres(inCells: area.cellRanges)
            var found = Set<String>(minimumCapacity: zones.count)
            for zone in zones
            where period.holds(zone.period) && AppNamespace.belongs(zone.deviceId, to: app)
                && area.contains(zone.coordinate)
            {
                found.insert(zone.deviceId)
            }
            return found
        case .visited(let pois, let radius, let window):
            guard let history else { throw AudiencesUnsupported() }
            return try await Self.visitors(
                of: pois, radius: radius, window: window.bounds(now: now), app: app, history: history)
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
            // No positive part: everyone the app can reach, less the `not` parts.
            if kept == nil, let tags { kept = Set(try await tags.devices(inApp: app)) }
            guard var members = kept else { return [] }
            // In place: a million members are not copied to take a few away.
            kept = nil
            members.subtract(removed)
            return members
        case .not:
            // Refused by the parser outside `all`; nothing to take away from.
            return []
        }
    }

    /// The devices of `app` with a visit within `radius` of one of `pois` that overlaps `window`: the visits of
    /// the cells around the POIs, each checked against the POIs of its own neighbourhood.
    static func visitors(
        of pois: [Coordinate], radius: Double, window: (from: Double, to: Double), app: String,
        history: any AudienceHistory
    ) async throws -> Set<String> {
        guard !pois.isEmpty else { return [] }
        var byCell: [Int64: [Coordinate]] = [:]
        var ranges: [ClosedRange<Int64>] = []
        for poi in pois {
            byCell[VisitCells.cell(latitude: poi.latitude, longitude: poi.longitude), default: []].append(poi)
            ranges += VisitCells.grid.ranges(center: poi, radius: radius)
        }
        let visits = try await history.visitPlaces(
            inCells: LastFixCells.merged(ranges), from: window.from, to: window.to)
        var found = Set<String>(minimumCapacity: visits.count)
        for visit in visits
        where !found.contains(visit.deviceId) && AppNamespace.belongs(visit.deviceId, to: app) {
            search: for range in VisitCells.grid.ranges(center: visit.coordinate, radius: radius) {
                for cell in range {
                    for poi in byCell[cell] ?? [] where poi.distance(to: visit.coordinate) <= radius {
                        found.insert(visit.deviceId)
                        break search
                    }
                }
            }
        }
        return found
    }
}
