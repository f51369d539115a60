import ArgumentParser
import EnrichmentService
import Foundation

/// The service's settings as flags; each overrides the ENRICH_* variable named in its help.
struct ServiceOptions: ParsableArguments {
    @Option(help: "Address to listen on (ENRICH_HOST, default 127.0.0.1).") var host: String?
    @Option(help: "Port to listen on, 0 for any free port (ENRICH_PORT, default 8080).") var port: String?
    @Option(help: "SQLite file; its folder is created (ENRICH_DB, default data/enrichment.sqlite).") var db: String?
    @Option(help: "normal (survives kill -9) or full (fsync every commit, survives power loss) (ENRICH_DURABILITY, default normal).")
    var durability: String?
    @Option(help: "Load the bundled sample POIs into an empty database: true|false (ENRICH_SAMPLE_POIS, default true).")
    var samplePois: String?
    @Option(help: "Body mode: default (human template) or woosmap (SDK-exact strings) (ENRICH_MODE, default default).")
    var mode: String?
    @Option(help: "Staleness window in seconds (ENRICH_STALENESS_WINDOW, default 300).") var stalenessWindow: String?
    @Option(help: "Reject timestamps more than this many seconds in the future, or 'off' (ENRICH_MAX_FUTURE_SKEW, default off).")
    var maxFutureSkew: String?
    @Option(help: "A fix older than this many seconds counts as no fix (ENRICH_FIX_MAX_AGE, default 3600).") var fixMaxAge: String?
    @Option(help: "Places provider: local, woosmap or none (ENRICH_PLACES, default local).") var places: String?
    @Option(help: "Woosmap-compatible base URL (ENRICH_WOOSMAP_URL, default https://api.woosmap.com).") var woosmapUrl: String?
    @Option(help: "POIs searched per enrichment, 1-300 (ENRICH_PLACES_LIMIT, default 5).") var placesLimit: String?
    @Option(help: "Only POIs within this many metres (ENRICH_PLACES_RADIUS, default unlimited).") var placesRadius: String?
    @Option(help: "Comma-separated POI types to keep (ENRICH_PLACES_TYPES).") var placesTypes: String?
    @Option(help: "Comma-separated POI tags to keep (ENRICH_PLACES_TAGS).") var placesTags: String?
    @Option(help: "Woosmap query every places search applies, e.g. 'type:\"cafe\" AND user.rating:>=4' (ENRICH_PLACES_QUERY).")
    var placesQuery: String?
    @Option(help: "Seconds one upstream request may take (ENRICH_UPSTREAM_TIMEOUT, default 1.0).") var upstreamTimeout: String?
    @Option(help: "Seconds the places step may take before the result is degraded (ENRICH_DEADLINE, default 2.0).")
    var deadline: String?
    @Option(help: "Static map: google or none (ENRICH_MAP, default google).") var map: String?
    @Option(help: "Map URL form: current or legacy (SDK's http://maps.google.com with sensor=true) (ENRICH_MAP_STYLE, default current).")
    var mapStyle: String?
    @Option(help: "Static map base URL (ENRICH_MAP_URL, default per style).") var mapUrl: String?
    @Option(help: "Body template for default mode, e.g. '{{name}} is {{distance}} away' (ENRICH_BODY_TEMPLATE).") var bodyTemplate: String?
    @Option(help: "Template for the location-only body, e.g. 'Near {{lat}}, {{lng}}' (ENRICH_LOCATION_TEMPLATE).") var locationTemplate: String?
    @Option(help: "Largest JSON request body in bytes (ENRICH_MAX_BODY, default 1048576).") var maxBody: String?
    @Option(help: "Largest POI import body in bytes (ENRICH_MAX_IMPORT, default 67108864).") var maxImport: String?
    @Option(help: "trace, debug, info, notice, warning, error or critical (ENRICH_LOG_LEVEL, default info).") var logLevel: String?
    @Option(help: "Seconds a connection may wait with no request under way before it is closed (ENRICH_IDLE_TIMEOUT, default 60).")
    var idleTimeout: String?
    @Option(help: "Seconds a request's line and headers may take from its first byte (ENRICH_HEADER_TIMEOUT, default 10).")
    var headerTimeout: String?
    @Option(help: "Seconds a request's body may take after its headers (ENRICH_BODY_TIMEOUT, default 60).")
    var bodyTimeout: String?
    @Option(help: "Most connections held at once; at the cap the longest-idle one is closed (ENRICH_MAX_CONNECTIONS, default: the descriptor limit less 64).")
    var maxConnections: String?

    /// Builds the configuration: defaults, then ENRICH_* variables, then these flags.
    ///
    /// Secrets (ENRICH_WOOSMAP_KEY, ENRICH_MAP_KEY, ENRICH_MAP_SIGNING_SECRET, ENRICH_API_KEY) are read from the
    /// environment only, so they never appear in `ps` output or shell history.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServiceConfiguration {
        var configuration = ServiceConfiguration()
        do {
            try configuration.apply(environment: environment)
            let flags: [(String, String?)] = [
                ("ENRICH_HOST", host), ("ENRICH_PORT", port), ("ENRICH_DB", db), ("ENRICH_DURABILITY", durability),
                ("ENRICH_SAMPLE_POIS", samplePois), ("ENRICH_MODE", mode), ("ENRICH_STALENESS_WINDOW", stalenessWindow),
                ("ENRICH_MAX_FUTURE_SKEW", maxFutureSkew), ("ENRICH_FIX_MAX_AGE", fixMaxAge), ("ENRICH_PLACES", places),
                ("ENRICH_WOOSMAP_URL", woosmapUrl), ("ENRICH_PLACES_LIMIT", placesLimit),
                ("ENRICH_PLACES_RADIUS", placesRadius), ("ENRICH_PLACES_TYPES", placesTypes),
                ("ENRICH_PLACES_TAGS", placesTags), ("ENRICH_PLACES_QUERY", placesQuery),
                ("ENRICH_UPSTREAM_TIMEOUT", upstreamTimeout),
                ("ENRICH_DEADLINE", deadline), ("ENRICH_MAP", map), ("ENRICH_MAP_STYLE", mapStyle),
                ("ENRICH_MAP_URL", mapUrl), ("ENRICH_BODY_TEMPLATE", bodyTemplate),
                ("ENRICH_LOCATION_TEMPLATE", locationTemplate), ("ENRICH_MAX_BODY", maxBody),
                ("ENRICH_MAX_IMPORT", maxImport), ("ENRICH_LOG_LEVEL", logLevel),
                ("ENRICH_IDLE_TIMEOUT", idleTimeout), ("ENRICH_HEADER_TIMEOUT", headerTimeout),
                ("ENRICH_BODY_TIMEOUT", bodyTimeout), ("ENRICH_MAX_CONNECTIONS", maxConnections),
            ]
            for case let (key, value?) in flags { try configuration.set(key, value) }
            try configuration.validate()
        } catch {
            throw ValidationError(error.description)
        }
        return configuration
    }
}
