import ArgumentParser
import EnrichmentRuntime
import Essentials
import Foundation
import Logging
import ServiceLifecycle

/// `enrichment-server demo`: the service as `serve` runs it, on a database of its own seeded with the demo devices
/// that the README's audience examples describe.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the service on a demo database seeded with the devices the README's examples describe.",
        discussion: """
            Starts the service as `serve` does, on its own SQLite file (data/demo.sqlite unless --db says otherwise; \
            ENRICH_DB and ENRICH_DATABASE_URL are not read, so the demo never writes to the service's database) \
            with the bundled sample POIs. Once it listens, it seeds through its own HTTP API: seven devices d1 to \
            d7 with a fix each (fresh at every start, and reported again every 5 minutes while it runs), tags and \
            a time zone set at token registration, three weeks of visits for d1, d2 and d3 (from which the service \
            builds their home and work zones), and a custom region 'depot'. Each start first deletes the demo \
            devices and seeds them anew: starting it again refreshes the data and never duplicates it. The log \
            says "demo ready" when the examples can be run (README.md, docs/AUDIENCES.md).

            Any other setting of `serve` may follow (see `serve --help`), e.g. --log-level debug. With \
            ENRICH_API_KEY set, the demo seeds with that key and every request needs it, as with `serve`.

            Example:
              enrichment-server demo
              curl -s localhost:8080/v1/audiences/preview -H 'content-type: application/json' \\
                -d '{"audience": {"in_region": "depot"}}'
            """)

    /// The demo's database unless `--db` names another.
    static let defaultDatabase = "data/demo.sqlite"

    @Option(
        help: ArgumentHelp(
            "The demo's SQLite file, created when missing.", valueName: "path"))
    var db: String = Self.defaultDatabase

    @Option(help: ArgumentHelp("The port to listen on (default: ENRICH_PORT, else 8080; 0 picks a free one)."))
    var port: Int?

    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp("Other settings of `serve`, as --flag value (see `serve --help`).", valueName: "settings"))
    var settings: [String] = []

    /// The configuration `serve` would resolve from `environment` and the settings, on the demo's database and port.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> ServiceConfiguration
    {
        // The service's database variables are dropped: the demo deletes and rewrites devices d1 to d7.
        let own = environment.filter { $0.key != "ENRICH_DB" && $0.key != "ENRICH_DATABASE_URL" }
        var configuration: ServiceConfiguration
        do {
            configuration = try Serve.configuration(arguments: settings, environment: own)
        } catch {
            throw ValidationError(error.description)
        }
        configuration.databasePath = db
        if let port { configuration.port = port }
        configuration.loadSamplePOIs = true
        let services: [(String, String?)] = [
            ("serve's default", ServiceConfiguration().databasePath), ("ENRICH_DB", environment["ENRICH_DB"]),
        ]
        for case (let name, let path?) in services where Self.sameFile(db, path) {
            throw ValidationError(
                "--db \(db) is the service's database (\(name)): the demo deletes and rewrites devices d1 to d7 in "
                    + "its database; give it a file of its own, e.g. the default \(Self.defaultDatabase)")
        }
        return configuration
    }

    /// Whether two paths name the same file (relative ones from the working directory, symbolic links followed).
    static func sameFile(_ a: String, _ b: String) -> Bool {
        func resolved(_ path: String) -> String {
            URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        }
        return resolved(a) == resolved(b)
    }

    func validate() throws {
        if let port, !(0...65_535).contains(port) {
            throw ValidationError("--port must be 0 to 65535 (0 picks a free one)")
        }
        _ = try configuration()
    }

    func run() async throws {
        let configuration = try configuration()
        if ProcessInfo.processInfo.environment["ENRICH_DATABASE_URL"] != nil {
            FileHandle.standardError.write(Data("demo: ENRICH_DATABASE_URL is not read: the demo uses \(db)\n".utf8))
        }
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let seeding = DemoSeeding(configuration: configuration, ports: ports)
        do {
            try await Serve.run(configuration, services: [seeding]) { port in
                announce.yield(port)
                announce.finish()
            }
        } catch let error as DemoSeedError {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// Seeds the demo once the server listens, says so in the log, then keeps the demo's fixes fresh until shutdown.
struct DemoSeeding: Service {
    let configuration: ServiceConfiguration
    let ports: AsyncStream<Int>

    func run() async throws {
        var listening = ports.makeAsyncIterator()
        guard let port = await listening.next() else { return }
        let logger = Logger(label: "enrichment-server")
        let seeder = DemoSeeder(
            baseURL: DemoSeeder.baseURL(host: configuration.host, port: port), apiKey: configuration.apiKey)
        let report: DemoSeeder.Report
        do { report = try await seeder.seed(now: Date().timeIntervalSince1970) } catch {
            // Stopped (SIGINT) while seeding: the server is gone, which is no seeding error.
            if Task.isShuttingDownGracefully || Task.isCancelled { return }
            throw error
        }
        logger.notice(
            "demo ready",
            metadata: [
                "devices": "\(DemoData.deviceIDs.joined(separator: ","))", "visits": "\(report.visits)",
                "region": "\(DemoData.regionID)", "database": "\(configuration.databasePath)",
                "address": "\(seeder.baseURL)",
            ])
        // The examples ask for fixes at most 10 minutes old: the devices report theirs again, as phones would.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(DemoData.refreshInterval))
                do { try await seeder.refreshFixes(now: Date().timeIntervalSince1970) } catch {
                    logger.warning("demo: the devices' fixes were not refreshed", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
