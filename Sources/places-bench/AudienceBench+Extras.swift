import ArgumentParser
import Delivery
import EnrichmentCore
import EnrichmentPostgres
import EnrichmentRuntime
import EnrichmentStorage
import Essentials
import Foundation
import LocationCore

/// The lines of a CSV file after its header, read one at a time (the visits of 1M devices are 6.5M lines).
struct CSVLines {
    let text: String
    var position: String.Index

    init(_ path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read \(path)")
        }
        let text = String(decoding: data, as: UTF8.self)
        self.text = text
        position = text.utf8.firstIndex(of: UInt8(ascii: "\n")).map { text.utf8.index(after: $0) } ?? text.endIndex
    }

    /// The next line's fields (empty fields kept), nil at the end.
    mutating func next() -> [Substring]? {
        while position < text.endIndex {
            let end = text.utf8[position...].firstIndex(of: UInt8(ascii: "\n")) ?? text.endIndex
            let line = text[position..<end]
            position = end < text.endIndex ? text.utf8.index(after: end) : end
            if !line.isEmpty { return line.split(separator: ",", omittingEmptySubsequences: false) }
        }
        return nil
    }
}

/// One timed audience of the extras: its name (the reference in bench-audiences.sh computes the same by name),
/// the audience, and the store read under it (timed alone, to tell the store's time from the resolver's).
struct ExtraQuery {
    let name: String
    let kind: String
    let audience: Audience
    let storeRead: (@Sendable () async throws -> Int)?
}

extension Audiences {
    static let paris = Coordinate(latitude: 48.8566, longitude: 2.3522)
    /// Central Paris, an irregular hexagon (the reference uses the same vertices).
    static let parisPolygon = [
        (48.905, 2.280), (48.900, 2.410), (48.850, 2.440), (48.815, 2.380), (48.825, 2.250), (48.870, 2.230),
    ].map { Coordinate(latitude: $0.0, longitude: $0.1) }
    static let week = 604_800.0

    func loadAndTimeExtras(_ runtime: EnrichmentRuntime, folder: String, now: Double) async throws {
        if !timeOnly {
            try await loadTags(runtime, path: "\(folder)/tags.csv", now: now)
            try await loadHistory(runtime, zois: "\(folder)/zois.csv", visits: "\(folder)/visits.csv", now: now)
        }
        var pois: [String: Coordinate] = [:]
        var byType: [String: [Coordinate]] = [:]
        var lines = try CSVLines("\(folder)/pois.csv")
        while let row = lines.next() {
            let position = Coordinate(latitude: Double(row[1])!, longitude: Double(row[2])!)
            pois[String(row[0])] = position
            byType[String(row[3]), default: []].append(position)
        }
        guard let poi = pois[poiId], let history = runtime.location.audienceHistory else {
            throw ValidationError("no POI \(poiId), or a store without audience history")
        }
        let tokens = runtime.tokens
        let resolver = AudienceResolver(fixes: runtime.fixes, tags: tokens, history: history)
        func tags(_ name: String, _ wanted: [String]) -> ExtraQuery {
            ExtraQuery(
                name: name, kind: "tags", audience: .tags(wanted),
                storeRead: {
                    var rows = 0
                    for tag in wanted { rows += try await tokens.devices(taggedWith: tag).count }
                    return rows
                })
        }
        func zoi(_ name: String, _ area: AudienceArea) -> ExtraQuery {
            ExtraQuery(
                name: name, kind: "zoi", audience: .zoi(period: .home, area: area),
                storeRead: { try await history.zoneCentres(inCells: area.cellRanges).count })
        }
        func visited(_ name: String, _ positions: [Coordinate]) -> ExtraQuery {
            let ranges = LastFixCells.merged(positions.flatMap { VisitCells.grid.ranges(center: $0, radius: 100) })
            return ExtraQuery(
                name: name, kind: "visited",
                audience: .visited(pois: positions, radius: 100, window: .last(Self.week)),
                storeRead: { try await history.visitPlaces(inCells: ranges, from: now - Self.week, to: now).count })
        }
        let homeParis2km = Audience.zoi(period: .home, area: .circle(center: Self.paris, radius: 2_000))
        let queries = [
            tags("tags_common", ["plan:free"]),
            tags("tags_two", ["lang:fr", "topic:sports"]),
            tags("tags_rare", ["beta:tester"]),
            zoi("zoi_home_paris_2km", .circle(center: Self.paris, radius: 2_000)),
            zoi("zoi_home_paris_10km", .circle(center: Self.paris, radius: 10_000)),
            zoi("zoi_home_paris_polygon", .polygon(Self.parisPolygon)),
            visited("visited_poi_7d", [poi]),
            visited("visited_cafe_7d", byType["cafe"] ?? []),
            ExtraQuery(
                name: "all_near_paris_2km_not_home_there", kind: "all",
                audience: .all([
                    .near(center: Self.paris, radius: 2_000, maxFixAge: 3_600, maxAccuracy: 500), .not(homeParis2km),
                ]), storeRead: nil),
            ExtraQuery(
                name: "all_pro_visited_gym_7d", kind: "all",
                audience: .all([
                    .tags(["plan:pro"]),
                    .visited(pois: byType["gym"] ?? [], radius: 100, window: .last(Self.week)),
                ]), storeRead: nil),
        ]
        for query in queries {
            var times: [Double] = []
            var count = 0
            for _ in 0..<runs {
                let begin = ContinuousClock.now
                count = try await resolver.resolve(query.audience, app: AppNamespace.defaultApp, now: now).count
                times.append(Self.milliseconds(since: begin))
            }
            times.sort()
            var fields: [String: JSONValue] = [
                "phase": .string("audience"), "name": .string(query.name), "kind": .string(query.kind),
                "count": .int(Int64(count)), "median_ms": .double(times[times.count / 2]),
                "max_ms": .double(times.last ?? 0),
            ]
            if case .visited(let positions, _, _) = query.audience { fields["pois"] = .int(Int64(positions.count)) }
            if let read = query.storeRead {
                var storeTimes: [Double] = []
                var rows = 0
                for _ in 0..<3 {
                    let begin = ContinuousClock.now
                    rows = try await read()
                    storeTimes.append(Self.milliseconds(since: begin))
                }
                storeTimes.sort()
                fields["store_rows"] = .int(Int64(rows))
                fields["store_ms"] = .double(storeTimes[1])
            }
            Self.emit(Self.line(.object(fields)))
        }
    }

    static func milliseconds(since begin: ContinuousClock.Instant) -> Double {
        Double((ContinuousClock.now - begin) / .microseconds(1)) / 1000
    }

    /// Each device's tags through the token store's bulk write path (`setProfiles`, the rows registration's
    /// `setProfile` writes), `chunk` devices per transaction, two chunks in flight.
    func loadTags(_ runtime: EnrichmentRuntime, path: String, now: Double) async throws {
        let tokens = runtime.tokens
        var lines = try CSVLines(path)
        let started = ContinuousClock.now
        var devices = 0
        var tagCount = 0
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            var changes: [ProfileChange] = []
            func send() async throws {
                if running >= 2 {
                    try await group.next()
                    running -= 1
                }
                let batch = changes
                changes = []
                group.addTask { try await tokens.setProfiles(batch, at: now) }
                running += 1
            }
            while let row = lines.next() {
                let tags = row[1].split(separator: " ").map(String.init)
                devices += 1
                tagCount += tags.count
                changes.append(ProfileChange(deviceId: String(row[0]), tags: tags))
                if changes.count == chunk { try await send() }
            }
            if !changes.isEmpty { try await send() }
            try await group.waitForAll()
        }
        let seconds = Self.milliseconds(since: started) / 1000
        Self.emit(
            Self.line(
                .object([
                    "phase": .string("load_tags"), "devices": .int(Int64(devices)), "tags": .int(Int64(tagCount)),
                    "seconds": .double(seconds), "devices_per_second": .double(Double(devices) / seconds),
                ])))
    }

    /// Every device's zones and visits through the store's bulk path, `importHistory` (the rows `updateVisits`
    /// writes, without the visit pipeline), `chunk` devices per transaction, two chunks in flight.
    func loadHistory(_ runtime: EnrichmentRuntime, zois: String, visits: String, now: Double) async throws {
        typealias History = (deviceId: String, visits: [Visit], zois: [ZoneOfInterest])
        let load: @Sendable ([History]) async throws -> Void
        switch runtime.location.store {
        case let store as SQLiteLocationStore: load = { try await store.importHistory($0) }
        case let store as PostgresLocationStore: load = { try await store.importHistory($0) }
        default: throw ValidationError("a location store without importHistory")
        }
        var zoneLines = try CSVLines(zois)
        var visitLines = try CSVLines(visits)
        var pending = visitLines.next()
        let started = ContinuousClock.now
        var devices = 0
        var visitCount = 0
        var zoneCount = 0
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            var batch: [History] = []
            batch.reserveCapacity(chunk)
            func flush() async throws {
                if running >= 2 {
                    try await group.next()
                    running -= 1
                }
                group.addTask { [batch] in try await load(batch) }
                running += 1
                batch.removeAll(keepingCapacity: true)
            }
            while let zone = zoneLines.next() {
                let id = String(zone[0])
                var newVisits: [Visit] = []
                while let row = pending, row[0] == zone[0] {
                    let departure = now - Double(row[4])!
                    newVisits.append(
                        Visit(
                            id: "\(id)-v\(newVisits.count)", deviceId: id, arrival: now - Double(row[3])!,
                            departure: departure, latitude: Double(row[1])!, longitude: Double(row[2])!,
                            horizontalAccuracy: 20, recordedAt: departure))
                    pending = visitLines.next()
                }
                var zones = [
                    Self.zone(
                        id: "\(id)-home", latitude: Double(zone[1])!, longitude: Double(zone[2])!,
                        period: ZOIPeriod.home, now: now)
                ]
                if !zone[3].isEmpty {
                    zones.append(
                        Self.zone(
                            id: "\(id)-work", latitude: Double(zone[3])!, longitude: Double(zone[4])!,
                            period: ZOIPeriod.work, now: now))
                }
                devices += 1
                visitCount += newVisits.count
                zoneCount += zones.count
                batch.append((id, newVisits, zones))
                if batch.count == chunk { try await flush() }
            }
            if !batch.isEmpty { try await flush() }
            try await group.waitForAll()
        }
        guard pending == nil else { throw ValidationError("visits of a device not in \(zois): \(pending![0])") }
        let seconds = Self.milliseconds(since: started) / 1000
        Self.emit(
            Self.line(
                .object([
                    "phase": .string("load_history"), "devices": .int(Int64(devices)),
                    "zois": .int(Int64(zoneCount)), "visits": .int(Int64(visitCount)), "seconds": .double(seconds),
                    "devices_per_second": .double(Double(devices) / seconds),
                    "visits_per_second": .double(Double(visitCount) / seconds), "chunk": .int(Int64(chunk)),
                ])))
    }

    /// A plausible stored ZOI at a position: a 200 m Gaussian, a month of visits, no weekly profile.
    static func zone(id: String, latitude: Double, longitude: Double, period: String, now: Double) -> ZoneOfInterest {
        ZoneOfInterest(
            id: id, meanX: SphericalMercator.lon2x(longitude), meanY: SphericalMercator.lat2y(latitude),
            inverse: [1 / 40_000, 0, 0, 1 / 40_000], det: 1.6e9, prior: 0.5, accumulator: 12, age: 0, visitIds: [],
            startTime: now - 30 * 86_400, endTime: now - 3_600, duration: 36_000,
            weeklyDensity: Array(repeating: 0, count: 168), period: period, wktPolygon: "")
    }
}
