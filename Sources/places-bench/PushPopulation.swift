import APNsCore
import ArgumentParser
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore

/// `push-population`: loads a population (gen-population.py's CSV) as devices a push can reach: each device's last
/// fix and one sandbox token (`%064x` of its row), through the stores' own write paths, 10,000 per transaction (run
/// by `scripts/bench-million.sh`; never by tests).
struct PushPopulation: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load a population's fixes and one APNs token per device; one JSON line of timings.")

    @Option(help: "Population CSV written by scripts/gen-population.py.") var population: String
    @Option(help: "SQLite file (default) ...") var database: String?
    @Option(help: "... or a PostgreSQL URL (postgres://...).") var databaseURL: String?
    @Option(help: "The instant the population's ages count back from (epoch seconds; default now).") var now: Double?

    func run() async throws {
        var configuration = ServiceConfiguration()
        configuration.databasePath = database ?? "push-population.sqlite"
        configuration.databaseURL = databaseURL.map { Secret($0) }
        let runtime = try await EnrichmentRuntime.open(configuration, scope: .storage)
        let now = self.now ?? Date().timeIntervalSince1970
        guard let data = FileManager.default.contents(atPath: population) else {
            throw ValidationError("cannot read \(population)")
        }
        let rows = String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst()
        let started = ContinuousClock.now
        var fixes: [LocationFix] = []
        var tokens: [TokenRegistration] = []
        var devices = 0
        func flush() async throws {
            try await runtime.fixes.insert(fixes)
            _ = try await runtime.tokens.registerAll(tokens)
            fixes.removeAll(keepingCapacity: true)
            tokens.removeAll(keepingCapacity: true)
        }
        for (index, line) in rows.enumerated() {
            let row = line.split(separator: ",")
            guard row.count >= 5, let lat = Double(row[1]), let lng = Double(row[2]), let age = Double(row[3]),
                let accuracy = Double(row[4])
            else { continue }
            let id = String(row[0])
            fixes.append(
                LocationFix(
                    deviceId: id, coordinate: Coordinate(latitude: lat, longitude: lng), fixTime: now - age,
                    horizontalAccuracy: accuracy, receivedAt: now))
            tokens.append(
                TokenRegistration(
                    deviceId: id, token: String(format: "%064x", index), topic: "com.example.app",
                    environment: .sandbox, registeredAt: now))
            devices += 1
            if fixes.count == 10_000 { try await flush() }
        }
        if !fixes.isEmpty { try await flush() }
        let seconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1e6
        Audiences.emit(
            Audiences.line(
                .object([
                    "phase": .string("push-population"), "devices": .int(Int64(devices)),
                    "seconds": .double(seconds), "devices_per_second": .double(Double(devices) / seconds),
                ])))
    }
}
