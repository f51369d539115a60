import ArgumentParser
import EnrichmentService
import Hummingbird
import Logging

/// `enrichment-server serve`: run the HTTP service until SIGINT/SIGTERM (graceful shutdown).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP service (the default command).",
        discussion: """
            With no configuration it stores data in data/enrichment.sqlite, loads the bundled sample POIs, and \
            listens on http://127.0.0.1:8080. Secrets come from the environment only: ENRICH_API_KEY (bearer auth), \
            ENRICH_WOOSMAP_KEY, ENRICH_MAP_KEY, ENRICH_MAP_SIGNING_SECRET.
            """)

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let configuration = try options.configuration()
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = configuration.logLevel
            return handler
        }
        let app = try await buildApplication(configuration)
        try await app.runService()
    }
}
