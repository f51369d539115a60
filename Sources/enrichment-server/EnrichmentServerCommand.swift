import ArgumentParser

/// `enrichment-server`: run the service (default) or import POIs from a file.
@main
struct EnrichmentServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enrichment-server",
        abstract: "Push-notification enrichment service (APNs payloads + last fix + nearby POIs + static map).",
        discussion: "Every option can also be set with the ENRICH_* environment variable shown in its help; flags win.",
        subcommands: [Serve.self, ImportPOIs.self],
        defaultSubcommand: Serve.self)
}
