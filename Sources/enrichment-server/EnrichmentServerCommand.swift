import ArgumentParser
import Essentials

/// `enrichment-server`: run the service (default) or its demo, import POIs from a file, replay visits, make a key.
@main
struct EnrichmentServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enrichment-server",
        abstract: "Push-notification enrichment service (APNs payloads + last fix + nearby POIs + static map).",
        discussion:
            "Every setting can be given as a flag or as the ENRICH_* variable shown in `serve --help`; flags win.",
        version: BuildInfo.version,
        subcommands: [Serve.self, Demo.self, ImportPOIs.self, ReplayZOIs.self, NewAPIKey.self],
        defaultSubcommand: Serve.self)
}
