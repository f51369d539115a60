import EnrichmentCore
import Foundation

/// Benchmark driver (not a test): nearest-k queries, one at a time, on the in-memory index.
///
/// `places-bench CSV [--queries N] [--k K] [--points P] [--seed S]` prints one JSON line with the build time,
/// queries per second and latency percentiles. With `--points` larger than the file, extra points are made by
/// moving copies of the real places by up to about 2 km (deterministic for a seed). Query points are real places
/// moved by up to about 5 km, so they land where POIs are dense, as device fixes do.
@main
struct PlacesBench {
    static func main() throws {
        var arguments = Array(CommandLine.arguments.dropFirst())
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let value = Int(arguments[index + 1]) else { return fallback }
            arguments.removeSubrange(index...(index + 1))
            return value
        }
        let queries = option("--queries", 200_000)
        let k = option("--k", 5)
        let wanted = option("--points", 0)
        var random = SplitMix(seed: UInt64(option("--seed", 42)))
        guard let path = arguments.first, let data = FileManager.default.contents(atPath: path) else {
            FileHandle.standardError.write(Data("usage: places-bench PLACES.csv [--queries N] [--k K] [--points P] [--seed S]\n".utf8))
            exit(64)
        }
        var pois = try POICSV.parse(data).pois
        let real = pois.count
        var copy = 0
        while pois.count < wanted {
            let base = pois[copy % real]
            copy += 1
            let moved = Coordinate(latitude: max(-90, min(90, base.coordinate.latitude + random.uniform(-0.02, 0.02))),
                                   longitude: max(-180, min(180, base.coordinate.longitude + random.uniform(-0.02, 0.02))))
            pois.append(POI(storeId: "\(base.storeId)-\(copy)", name: base.name, coordinate: moved))
        }
        let buildStart = ContinuousClock.now
        let index = PlacesIndex(pois: pois)
        let buildTime = ContinuousClock.now - buildStart

        let points = (0..<queries).map { _ -> Coordinate in
            let base = pois[Int(random.next() % UInt64(real))].coordinate
            return Coordinate(latitude: max(-90, min(90, base.latitude + random.uniform(-0.05, 0.05))),
                              longitude: max(-180, min(180, base.longitude + random.uniform(-0.05, 0.05))))
        }
        let query = PlacesQuery(limit: k)
        var latencies = [Double](repeating: 0, count: queries)
        var checksum = 0.0
        let started = ContinuousClock.now
        for (i, point) in points.enumerated() {
            let t0 = ContinuousClock.now
            let result = index.nearest(to: point, query: query)
            latencies[i] = Double((ContinuousClock.now - t0) / .nanoseconds(1)) / 1000
            checksum += result.last?.distance ?? 0
        }
        let seconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1e6
        latencies.sort()
        func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        print(#"{"points":\#(pois.count),"queries":\#(queries),"k":\#(k),"build_ms":\#(Int(Double(buildTime / .milliseconds(1)))),"#
            + #""qps":\#(Int(Double(queries) / seconds)),"p50_us":\#(percentile(0.5)),"p99_us":\#(percentile(0.99)),"#
            + #""p999_us":\#(percentile(0.999)),"checksum":\#(Int(checksum))}"#)
    }
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
