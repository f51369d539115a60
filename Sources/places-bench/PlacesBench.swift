import ArgumentParser
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation

/// Benchmark and exactness driver for the places index (run by `scripts/bench-places.sh`; never by tests).
@main
struct PlacesBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "places-bench",
        abstract: "Measure and check the in-memory places index against a brute-force haversine scan.",
        subcommands: [Latency.self, Verify.self, Audiences.self, PushPopulation.self])
}

/// Options shared by both subcommands: which places, and how to make more of them.
struct PlacesOptions: ParsableArguments {
    @Option(help: "Places CSV (e.g. .cache/rg_cities1000.csv).") var places: String
    @Option(help: "Column mapping for the CSV, as for import-pois (default: the header names store fields).") var map:
        String?
    @Option(help: "Grow the set to this many places with moved copies of the real ones (synthetic, seeded).")
    var points: Int = 0
    @Option(help: "Seed for synthetic places and query points.") var seed: UInt64 = 42

    /// The places, the file's own first and synthetic copies after; `real` is how many came from the file.
    func load() throws -> (pois: [POI], real: Int) {
        guard let data = FileManager.default.contents(atPath: places) else {
            throw ValidationError("cannot read \(places); run scripts/fetch-places.sh first")
        }
        var pois = try POIBatch.read(data, format: .csv(try map.map { try POIColumnMapping.parse($0) })).pois
        var random = SplitMix(seed: seed &+ 1)
        let real = pois.count
        var copy = 0
        pois.reserveCapacity(max(points, real))
        while pois.count < points {
            let base = pois[copy % real]
            copy += 1
            // Up to about 2 km away, so synthetic places keep the real density pattern (cities, coasts, empty oceans).
            let moved = Coordinate(
                latitude: max(-90, min(90, base.coordinate.latitude + random.uniform(-0.02, 0.02))),
                longitude: max(-180, min(180, base.coordinate.longitude + random.uniform(-0.02, 0.02))))
            pois.append(POI(storeId: "\(base.storeId)-s\(copy)", name: base.name, coordinate: moved))
        }
        return (pois, real)
    }
}

/// `latency`: nearest-k throughput and latency of the index and of the brute-force scan on device-like points.
struct Latency: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Nearest-1 and nearest-5 throughput and p50/p99 latency, index vs brute-force scan; one JSON line each.")

    @OptionGroup var options: PlacesOptions
    @Option(help: "Queries timed on the index, per k.") var queries = 200_000
    @Option(help: "Queries timed on the brute-force scan, per k (each scans every place).") var bruteQueries = 1_000
    @Option(help: "Write the query points (lat,lng) here, so another tool can answer the same ones.") var emitQueries:
        String?

    func run() async throws {
        let (pois, real) = try options.load()
        let buildStart = ContinuousClock.now
        let index = PlacesIndex(pois: pois)
        let buildMs = (ContinuousClock.now - buildStart).milliseconds
        let scan = BruteForceScan(pois: pois)
        // Device-like query points: real places moved by up to about 5 km.
        var random = SplitMix(seed: options.seed)
        let points = (0..<queries).map { _ -> Coordinate in
            let base = pois[Int(random.next() % UInt64(real))].coordinate
            return Coordinate(
                latitude: max(-90, min(90, base.latitude + random.uniform(-0.05, 0.05))),
                longitude: max(-180, min(180, base.longitude + random.uniform(-0.05, 0.05))))
        }
        if let emitQueries {
            let text = points.map { "\($0.latitude),\($0.longitude)" }.joined(separator: "\n") + "\n"
            try Data(("lat,lng\n" + text).utf8).write(to: URL(fileURLWithPath: emitQueries))
        }
        for k in [1, 5] {
            let query = PlacesQuery(limit: k)
            let ours = Timing.run(points) { index.nearest(to: $0, query: query).last?.distance ?? 0 }
            print(ours.json(name: "index", k: k, places: pois.count, extra: ["build_ms": buildMs]))
            let brute = Timing.run(Array(points.prefix(bruteQueries))) {
                scan.nearest(to: $0, query: query).last?.distance ?? 0
            }
            print(brute.json(name: "brute_force", k: k, places: pois.count))
        }
    }
}

/// `verify`: top-k ids and distances of the index (and optionally the SQLite R*Tree store) equal the brute-force scan.
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Compare nearest-k ids and distances with a brute-force haversine scan on points over the whole globe.")

    @OptionGroup var options: PlacesOptions
    @Option(
        help:
            "Query points: 90% uniform over the sphere, 5% within 0.5 degrees of the antimeridian, 5% poleward of 85 degrees."
    )
    var queries = 10_000
    @Option(help: "Results compared per query.") var k = 5
    @Option(help: "Also check the SQLite store's R*Tree search on this database (already holding the same places).")
    var db: String?
    @Option(help: "Queries checked on the SQLite store (it is much slower).") var dbQueries = 1_000

    func run() async throws {
        let pois = try options.load().pois
        let index = PlacesIndex(pois: pois)
        let scan = BruteForceScan(pois: pois)
        var random = SplitMix(seed: options.seed &+ 7)
        let points = (0..<queries).map { i -> Coordinate in
            switch i % 20 {
            case 0:  // antimeridian band, both sides
                let lng = random.uniform(179.5, 180)
                return Coordinate(latitude: random.uniform(-60, 60), longitude: i % 40 == 0 ? lng : -lng)
            case 1:  // polar caps
                let lat = random.uniform(85, 90)
                return Coordinate(latitude: i % 40 == 1 ? lat : -lat, longitude: random.uniform(-180, 180))
            default:  // uniform over the sphere's area
                return Coordinate(
                    latitude: asin(random.uniform(-1, 1)) * 180 / .pi, longitude: random.uniform(-180, 180))
            }
        }
        let query = PlacesQuery(limit: k)
        let expected = await Parallel.map(points) { scan.nearest(to: $0, query: query) }
        var mismatches = 0
        var idMismatches = 0
        var farthestNearest = 0.0
        var over1000km = 0
        for (point, truth) in zip(points, expected) {
            let got = index.nearest(to: point, query: query)
            if got.map(\.poi.storeId) != truth.map(\.poi.storeId) { idMismatches += 1 }
            if got.map(\.poi.storeId) != truth.map(\.poi.storeId) || got.map(\.distance) != truth.map(\.distance) {
                mismatches += 1
                if mismatches <= 5 {
                    FileHandle.standardError.write(
                        Data(
                            "mismatch at \(point): index \(got.map { ($0.poi.storeId, $0.distance) }) vs scan \(truth.map { ($0.poi.storeId, $0.distance) })\n"
                                .utf8))
                }
            }
            let nearest = truth.first?.distance ?? 0
            farthestNearest = max(farthestNearest, nearest)
            if nearest > 1_000_000 { over1000km += 1 }
        }
        print(
            #"{"name":"verify_index","places":\#(pois.count),"queries":\#(points.count),"k":\#(k),"#
                + #""mismatches":\#(mismatches),"id_mismatches":\#(idMismatches),"#
                + #""queries_nearest_over_1000km":\#(over1000km),"farthest_nearest_km":\#(Int(farthestNearest / 1000))}"#
        )

        guard let db else { return }
        // The store as the service opens it (ENRICH_* settings honoured, --db over ENRICH_DB).
        let configuration = try ServiceConfiguration.resolve(
            environment: ProcessInfo.processInfo.environment, options: ["db": db])
        let store = try await EnrichmentRuntime.open(configuration, scope: .storage).pois
        var storeMismatches = 0
        var timings: [Double] = []
        for (point, truth) in zip(points.prefix(dbQueries), expected) {
            let started = ContinuousClock.now
            let got = try await store.nearest(to: point, query: query)
            timings.append((ContinuousClock.now - started).microseconds)
            if got.map(\.poi.storeId) != truth.map(\.poi.storeId) || got.map(\.distance) != truth.map(\.distance) {
                storeMismatches += 1
            }
        }
        timings.sort()
        print(
            #"{"name":"verify_sqlite_rtree","queries":\#(timings.count),"k":\#(k),"mismatches":\#(storeMismatches),"#
                + #""p50_us":\#(Timing.percentile(timings, 0.5)),"p99_us":\#(Timing.percentile(timings, 0.99))}"#)
    }
}

/// Times one call per point; keeps every latency for percentiles.
struct Timing {
    var latencies: [Double]
    var seconds: Double
    var checksum: Double

    static func run(_ points: [Coordinate], _ body: (Coordinate) -> Double) -> Timing {
        var latencies = [Double](repeating: 0, count: points.count)
        var checksum = 0.0
        let started = ContinuousClock.now
        for (i, point) in points.enumerated() {
            let t0 = ContinuousClock.now
            checksum += body(point)
            latencies[i] = (ContinuousClock.now - t0).microseconds
        }
        let seconds = (ContinuousClock.now - started).microseconds / 1e6
        return Timing(latencies: latencies.sorted(), seconds: seconds, checksum: checksum)
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        sorted.isEmpty ? 0 : (sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 100).rounded() / 100
    }

    func json(name: String, k: Int, places: Int, extra: [String: Int] = [:]) -> String {
        let fields = extra.sorted { $0.key < $1.key }.map { #","\#($0.key)":\#($0.value)"# }.joined()
        return #"{"name":"\#(name)","k":\#(k),"places":\#(places),"queries":\#(latencies.count),"#
            + #""qps":\#(Int(Double(latencies.count) / seconds)),"p50_us":\#(Self.percentile(latencies, 0.5)),"#
            + #""p99_us":\#(Self.percentile(latencies, 0.99)),"checksum":\#(Int(checksum))\#(fields)}"#
    }
}

/// Runs a pure function over an array on every core, keeping order.
enum Parallel {
    static func map<T: Sendable, R: Sendable>(_ items: [T], _ body: @escaping @Sendable (T) -> R) async -> [R] {
        let workers = max(1, ProcessInfo.processInfo.activeProcessorCount)
        let chunk = (items.count + workers - 1) / workers
        return await withTaskGroup(of: (Int, [R]).self) { group in
            for start in stride(from: 0, to: items.count, by: max(1, chunk)) {
                let slice = Array(items[start..<min(items.count, start + chunk)])
                group.addTask { (start, slice.map(body)) }
            }
            var parts: [(Int, [R])] = []
            for await part in group { parts.append(part) }
            return parts.sorted { $0.0 < $1.0 }.flatMap(\.1)
        }
    }
}

extension Duration {
    var microseconds: Double { Double(self / .nanoseconds(1)) / 1000 }
    var milliseconds: Int { Int(self / .milliseconds(1)) }
}

/// SplitMix64, for reproducible points.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func uniform(_ low: Double, _ high: Double) -> Double {
        low + (high - low) * Double(next() >> 11) / Double(1 << 53)
    }
}
