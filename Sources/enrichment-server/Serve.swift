import ArgumentParser
import EnrichmentRuntime
import EnrichmentService
import Essentials
import Foundation
import Hummingbird
import Logging
import OTel
import ServiceLifecycle
import Tracing

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

    /// The OTLP/HTTP traces URL for a configured endpoint: `/v1/traces` is added to an address with no path.
    static func tracesURL(_ endpoint: String) -> String {
        guard let url = URL(string: endpoint), url.path.isEmpty || url.path == "/" else { return endpoint }
        return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
    }

    func validate() throws {
        do { _ = try Self.configuration(arguments: settings) } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        let configuration: ServiceConfiguration
        do { configuration = try Self.configuration(arguments: settings) } catch {
            throw ValidationError(error.description)
        }
        try await Self.run(configuration)
    }

    /// Runs the service as `serve` does (tracing and logging as configured, then the application until SIGINT or
    /// SIGTERM) with `services` beside it; a start-up problem an operator can fix is printed as a sentence, exit 1.
    static func run(
        _ configuration: ServiceConfiguration, services: [any Service] = [],
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws {
        // Traces over OTLP/HTTP when an endpoint is set; then each log line made inside a span carries its trace id.
        var tracing: [any Service] = []
        var metadataProvider: Logger.MetadataProvider?
        if let endpoint = configuration.otlpEndpoint {
            var otel = OTel.Configuration.default
            otel.serviceName = "enrichment-server"
            otel.logs.enabled = false
            otel.metrics.enabled = false
            // A bare collector address gets OTLP/HTTP's traces path, as OTEL_EXPORTER_OTLP_ENDPOINT would.
            otel.traces.otlpExporter.endpoint = Self.tracesURL(endpoint)
            otel.traces.otlpExporter.protocol = .httpProtobuf
            let backend = try OTel.makeTracingBackend(configuration: otel)
            InstrumentationSystem.bootstrap(backend.factory)
            tracing.append(backend.service)
            metadataProvider = OTel.makeLoggingMetadataProvider()
        }
        LoggingSystem.bootstrap(
            { label, provider in
                var handler = StreamLogHandler.standardError(label: label, metadataProvider: provider)
                handler.logLevel = configuration.logLevel
                return handler
            }, metadataProvider: metadataProvider)
        do {
            let app = try await buildApplication(
                configuration, additionalServices: tracing + services, onServerRunning: onServerRunning)
            try await app.runService()
        } catch {
            guard let problem = startupProblem(error, configuration: configuration) else { throw error }
            FileHandle.standardError.write(Data("error: \(problem)\n".utf8))
            throw ExitCode(1)
        }
    }
}
