import ArgumentParser
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore

/// `audiences`: loads a population's last fixes into the service's store (SQLite file or PostgreSQL) through the
/// store's own write path, then times `near` audiences; with `--extras`, also loads each device's tags, zones of
/// interest and visits the same way and times `tags`, `zoi`, `visited` and combinations (run by
/// `scripts/bench-audiences.sh`; never by tests).
struct Audiences: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load a population (id,lat,lng,age_s,accuracy_m) and time near audiences; one JSON line each.")

    @Option(help: "Population CSV written by scripts/gen-population.py.") var population: String
    @Option(help: "Queries CSV: lat,lng,radius_m.") var queries: String
    @Option(help: "SQLite file (default) ...") var database: String?
    @Option(help: "... or a PostgreSQL URL (postgres://...).") var databaseURL: String?
    @Option(help: "Timed runs per query (the median is reported).") var runs = 7
    @Option(help: "The instant the population's ages count back from (epoch seconds; default now).") var now: Double?
    @Option(help: "Folder written by gen-population.py --extras: also load and time tags, zoi and visited.")
    var extras: String?
    @Option(help: "Devices per setProfiles or importHistory transaction while loading tags, zones and visits.")
    var chunk = 2_000
    @Option(help: "The POI of the one-POI visited audience.") var poiId = "p0"
    @Flag(help: "Load nothing: time the audiences of a database an earlier run loaded (e.g. after VACUUM).")
    var timeOnly = false

    func rows(_ path: String) throws -> [[Substring]] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read \(path)")
        }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst().map {
            $0.split(separator: ",")
        }
    }

    func run() async throws {
        var configuration = ServiceConfiguration()
        configuration.databasePath = database ?? "audience-bench.sqlite"
        configuration.databaseURL = databaseURL.map { Secret($0) }
        let runtime = try await EnrichmentRuntime.open(configuration, scope: .storage)
        let now = self.now ?? Date().timeIntervalSince1970
        if !timeOnly { try await loadFixes(runtime, now: now) }
        let resolver = AudienceResolver(fixes: runtime.fixes)
        for query in try rows(queries) {
            let center = Coordinate(latitude: Double(query[0])!, longitude: Double(query[1])!)
            let radius = Double(query[2])!
            let audience = Audience.near(center: center, radius: radius, maxFixAge: 3_600, maxAccuracy: 500)
            var times: [Double] = []
            var count = 0
            for _ in 0..<runs {
                let begin = ContinuousClock.now
                count = try await resolver.resolve(audience, app: AppNamespace.defaultApp, now: now).count
                times.append(Double((ContinuousClock.now - begin) / .microseconds(1)) / 1000)
            }
            times.sort()
            Self.emit(
                Self.line(
                    .object([
                        "phase": .string("near"), "lat": .double(center.latitude), "lng": .double(center.longitude),
                        "radius_m": .double(radius), "count": .int(Int64(count)),
                        "median_ms": .double(times[times.count / 2]), "max_ms": .double(times.last ?? 0),
                    ])))
        }
        if let extras {
            try await loadAndTimeExtras(runtime, folder: extras, now: now)
        }
    }

    /// Every device's fix through the store's own write path, 10,000 at a time.
    func loadFixes(_ runtime: EnrichmentRuntime, now: Double) async throws {
        let people = try rows(population)
        let rssBefore = Self.residentBytes()
        let started = ContinuousClock.now
        var batch: [LocationFix] = []
        batch.reserveCapacity(10_000)
        for row in people {
            batch.append(
                LocationFix(
                    deviceId: String(row[0]),
                    coordinate: Coordinate(latitude: Double(row[1])!, longitude: Double(row[2])!),
                    fixTime: now - Double(row[3])!, horizontalAccuracy: Double(row[4])!, receivedAt: now))
            if batch.count == 10_000 {
                try await runtime.fixes.insert(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try await runtime.fixes.insert(batch) }
        let loadSeconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1e6
        Self.emit(
            Self.line(
                .object([
                    "phase": .string("load"), "devices": .int(Int64(people.count)),
                    "seconds": .double(loadSeconds), "fixes_per_second": .double(Double(people.count) / loadSeconds),
                    "rss_growth_bytes": .int(Int64(Self.residentBytes() - rssBefore)),
                ])))
    }

    /// One line to stdout, written at once (not buffered: through `tee`, a stopped run shows what it measured).
    static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func line(_ value: JSONValue) -> String { String(decoding: JSONWriter.bytes(value), as: UTF8.self) }

    /// The process's resident set, bytes (Linux `/proc/self/statm`).
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }
}
