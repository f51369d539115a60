import ArgumentParser
import EnrichmentRuntime
import EnrichmentService
import Essentials
import Foundation
import Hummingbird
import Logging

/// `enrichment-server serve`: run the HTTP service until SIGINT/SIGTERM (graceful shutdown).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP service (the default command).",
        discussion: """
            With no configuration it stores data in data/enrichment.sqlite, loads the bundled sample POIs, and \
            listens on http://127.0.0.1:8080. Each setting below is a flag or its ENRICH_* variable (flags win); \
            secrets are read from the environment only.

            SETTINGS:
            \(ServiceConfiguration.settings.helpText)
            """,
        version: BuildInfo.version)

    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp("Settings as --flag value or --flag=value (listed below).", valueName: "settings"))
    var settings: [String] = []

    /// Defaults, then ENRICH_* variables, then flags; errors name the flag or variable as the user typed it.
    static func configuration(
        arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> ServiceConfiguration {
        var configuration = try ServiceConfiguration.resolve(environment: environment)
        try configuration.apply(arguments: arguments)
        try configuration.validate()
        return configuration
    }

    func validate() throws {
        do { _ = try Self.configuration(arguments: settings) } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        let configuration: ServiceConfiguration
        do { configuration = try Self.configuration(arguments: settings) } catch {
            throw ValidationError(error.description)
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = configuration.logLevel
            return handler
        }
        do {
            let app = try await buildApplication(configuration)
            try await app.runService()
        } catch {
            guard let problem = startupProblem(error, configuration: configuration) else { throw error }
            FileHandle.standardError.write(Data("error: \(problem)\n".utf8))
            throw ExitCode(1)
        }
    }
}
