import Delivery
import EnrichmentCore
import EnrichmentStorage
public import Essentials
import Foundation
import LocationCore
import Logging

extension ServiceConfiguration {
    /// Every setting of the service, declared once: flag, variable, type, default, help, secret or not.
    ///
    /// `enrichment-server serve`, `import-pois`, `push-sender simulate` (in-process) and `places-bench` read their
    /// configuration through this table, so each honours every `ENRICH_*` variable the service does.
    public static let settings = SettingsTable<ServiceConfiguration>(
        serviceSettings + deliverySettings + locationSettings)

    /// The service's own: listening, storage, enrichment, places, maps, limits, apps.
    static let serviceSettings: [Setting<ServiceConfiguration>] = [
        Setting(
            "host", "ENRICH_HOST", valueName: "address", help: "Address to listen on.", default: defaults.host,
            allowed: "a host name or IP address", parse: nonEmpty, store: { $0.host = $1 }),
        Setting(
            "port", "ENRICH_PORT", valueName: "port", help: "Port to listen on; 0 picks a free port.",
            default: "\(defaults.port)",
            allowed: "an integer port 0-65535 (0 picks a free port)", parse: integer(0...65535),
            store: { $0.port = $1 }),
        Setting(
            "db", "ENRICH_DB", valueName: "path", help: "SQLite file; its folder is created.",
            default: defaults.databasePath, allowed: "a file path", parse: nonEmpty,
            store: { $0.databasePath = $1 }),
        Setting(
            "database-url", "ENRICH_DATABASE_URL", valueName: "url",
            help: "PostgreSQL for every store (postgres://user:password@host:5432/db?sslmode=require); a secret, "
                + "read from the environment only (a flag would show its password in ps). Unset: the SQLite file.",
            default: "unset (SQLite)", allowed: "postgres://user:password@host:5432/database", secret: true,
            parse: nonEmpty, store: { $0.databaseURL = Secret($1) }),
        Setting(
            "database-pool", "ENRICH_DATABASE_POOL", valueName: "count",
            help: "Most PostgreSQL connections per node.", default: "\(defaults.databasePoolSize)",
            allowed: "an integer 1-1000", parse: integer(1...1_000), store: { $0.databasePoolSize = $1 }),
        Setting(
            "database-timeout", "ENRICH_DATABASE_TIMEOUT", valueName: "seconds",
            help: "Seconds to wait for a PostgreSQL connection.", default: "\(defaults.databaseConnectTimeout)",
            allowed: "seconds > 0 and at most 600", parse: seconds(600), store: { $0.databaseConnectTimeout = $1 }),
        Setting(
            "ready-timeout", "ENRICH_READY_TIMEOUT", valueName: "seconds",
            help:
                "Seconds GET /health/ready waits for the database before answering 503 database_unavailable (keep it below the probe's own timeout).",
            default: "\(defaults.readyTimeout)", allowed: "seconds > 0 and at most 60", parse: seconds(60),
            store: { $0.readyTimeout = $1 }),
        Setting(
            "database-wait", "ENRICH_DATABASE_WAIT", valueName: "seconds",
            help:
                "At start-up, how long to keep trying a PostgreSQL that refuses connections or is starting (0: fail at once).",
            default: "\(defaults.databaseWait)", allowed: "seconds, 0 to 3600",
            parse: { text in Double(trimmed(text)).flatMap { (0...3_600).contains($0) ? $0 : nil } },
            store: { $0.databaseWait = $1 }),
        Setting(
            "otlp-endpoint", "ENRICH_OTLP_ENDPOINT", valueName: "url",
            help:
                "Export traces (spans of each request, enrichment, fix ingest, delivery batch, database call, places "
                + "search and APNs send) over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318. Unset: no "
                + "tracing, and log lines carry no trace id.",
            default: "unset (off)", allowed: "an http:// or https:// URL",
            parse: { text in
                let value = text.trimmingCharacters(in: .whitespaces)
                return value.hasPrefix("http://") || value.hasPrefix("https://") ? value : nil
            },
            store: { $0.otlpEndpoint = $1 }),
        Setting(
            "poll-interval", "ENRICH_POLL_INTERVAL", valueName: "seconds",
            help:
                "How often an idle node looks for work no notification announced: other nodes' POI changes and "
                + "regions (PostgreSQL pushes them at once with LISTEN/NOTIFY; this is the safety net), due retries "
                + "and unclaimed deliveries. One query per interval per kind of work.",
            default: "\(defaults.pollInterval)", allowed: "seconds > 0 and at most 60", parse: seconds(60),
            store: { $0.pollInterval = $1 }),
        Setting(
            "device-memory", "ENRICH_DEVICE_MEMORY", valueName: "devices",
            help:
                "How many devices each per-device cache keeps in memory (last fix, region context, evaluation times, "
                + "visit detector position); the least recently used are forgotten first and read back from the "
                + "database. About 1 KiB per device in all: the default costs about 200 MiB at most.",
            default: "\(defaults.deviceMemory)", allowed: "an integer 0-100000000 (0: no cache)",
            parse: integer(0...100_000_000), store: { $0.deviceMemory = $1 }),
        Setting(
            "durability", "ENRICH_DURABILITY", valueName: "normal|full",
            help: "normal survives kill -9; full also fsyncs every commit and survives power loss.",
            default: defaults.durability.rawValue, allowed: "normal or full",
            parse: choice(SQLiteDatabase.Durability.self),
            store: { $0.durability = $1 }),
        Setting(
            "sample-pois", "ENRICH_SAMPLE_POIS", valueName: "true|false",
            help: "Load the bundled sample POIs into an empty database.", default: "\(defaults.loadSamplePOIs)",
            allowed: "true or false",
            parse: boolean, store: { $0.loadSamplePOIs = $1 }),
        Setting(
            "enrich-on-event-loop", "ENRICH_ON_EVENT_LOOP", valueName: "true|false",
            help:
                "Answer POST /v1/enrich on the connection's event loop when the device's fix is in memory (the same answer, less CPU); false sends every request through the router.",
            default: "\(defaults.enrichOnEventLoop)", allowed: "true or false",
            parse: boolean, store: { $0.enrichOnEventLoop = $1 }),
        Setting(
            "mode", "ENRICH_MODE", valueName: "default|woosmap",
            help: "Body mode: default (human template) or woosmap (SDK-exact strings).",
            default: defaults.mode.rawValue,
            allowed: "default or woosmap", parse: choice(BodyMode.self), store: { $0.mode = $1 }),
        Setting(
            "staleness-window", "ENRICH_STALENESS_WINDOW", valueName: "seconds",
            help: "A payload older than this is stale.", default: "\(defaults.stalenessWindow)",
            allowed: "whole seconds >= 0",
            parse: { Int64(trimmed($0)).flatMap { $0 >= 0 ? $0 : nil } }, store: { $0.stalenessWindow = $1 }),
        Setting(
            "max-future-skew", "ENRICH_MAX_FUTURE_SKEW", valueName: "seconds|off",
            help: "Reject timestamps more than this many seconds in the future.", default: "off",
            allowed: "whole seconds >= 0, or off",
            parse: { text -> Int64?? in
                let value = trimmed(text)
                if value.isEmpty || value == "off" { return .some(nil) }
                return Int64(value).flatMap { $0 >= 0 ? .some($0) : nil }
            }, store: { $0.maxFutureSkew = $1 }),
        Setting(
            "fix-max-age", "ENRICH_FIX_MAX_AGE", valueName: "seconds", help: "A fix older than this counts as no fix.",
            default: "\(defaults.fixMaxAge)", allowed: "seconds > 0", parse: positive, store: { $0.fixMaxAge = $1 }),
        Setting(
            "places", "ENRICH_PLACES", valueName: "local|woosmap|none", help: "Places provider.",
            default: defaults.places.rawValue,
            allowed: "local, woosmap or none", parse: choice(PlacesSource.self), store: { $0.places = $1 }),
        Setting(
            "woosmap-url", "ENRICH_WOOSMAP_URL", valueName: "url", help: "Woosmap-compatible base URL.",
            default: defaults.woosmapBaseURL, allowed: "an http(s) base URL such as https://api.woosmap.com",
            parse: httpURL, store: { $0.woosmapBaseURL = $1 }),
        Setting(
            "woosmap-key", "ENRICH_WOOSMAP_KEY", valueName: "key", help: "Woosmap private key.", default: "unset",
            allowed: "a non-empty key", secret: true, parse: { $0 }, store: { $0.woosmapKey = Secret($1) }),
        Setting(
            "places-limit", "ENRICH_PLACES_LIMIT", valueName: "count", help: "POIs searched per enrichment.",
            default: "\(defaults.placesLimit)", allowed: "an integer 1-300", parse: integer(1...300),
            store: { $0.placesLimit = $1 }),
        Setting(
            "places-radius", "ENRICH_PLACES_RADIUS", valueName: "metres", help: "Only POIs within this distance.",
            default: "unlimited", allowed: "metres > 0",
            parse: { text -> Double?? in trimmed(text).isEmpty ? .some(nil) : positive(text).map { .some($0) } },
            store: { $0.placesRadius = $1 }),
        Setting(
            "places-types", "ENRICH_PLACES_TYPES", valueName: "a,b", help: "Comma-separated POI types to keep.",
            default: "all", allowed: "a comma-separated list", parse: list, store: { $0.placesTypes = $1 }),
        Setting(
            "places-tags", "ENRICH_PLACES_TAGS", valueName: "a,b", help: "Comma-separated POI tags to keep.",
            default: "all", allowed: "a comma-separated list", parse: list, store: { $0.placesTags = $1 }),
        Setting(
            "places-query", "ENRICH_PLACES_QUERY", valueName: "query",
            help: "Woosmap query every places search applies, e.g. 'type:\"cafe\" AND user.rating:>=4'.",
            default: "none", allowed: "a Woosmap query such as type:\"cafe\" AND user.rating:>=4",
            parse: { text -> PlaceFilter?? in
                let value = trimmed(text)
                if value.isEmpty { return .some(nil) }
                return (try? PlaceFilter.parse(value)).map { .some($0) }
            }, store: { $0.placesQuery = $1 }),
        Setting(
            "upstream-timeout", "ENRICH_UPSTREAM_TIMEOUT", valueName: "seconds",
            help: "Seconds one upstream request may take.", default: "\(defaults.upstreamTimeout)",
            allowed: "seconds > 0 and at most 600", parse: seconds(600), store: { $0.upstreamTimeout = $1 }),
        Setting(
            "deadline", "ENRICH_DEADLINE", valueName: "seconds",
            help: "Seconds the places step may take before the result is degraded.", default: "\(defaults.deadline)",
            allowed: "seconds > 0 and at most 600", parse: seconds(600), store: { $0.deadline = $1 }),
        Setting(
            "map", "ENRICH_MAP", valueName: "google|none", help: "Static map.", default: "google",
            allowed: "google or none",
            parse: { text -> Bool? in
                switch trimmed(text) {
                case "google": true
                case "none": false
                default: nil
                }
            }, store: { $0.mapEnabled = $1 }),
        Setting(
            "map-style", "ENRICH_MAP_STYLE", valueName: "current|legacy",
            help: "Map URL form: current, or legacy (the SDK's http://maps.google.com with sensor=true).",
            default: defaults.mapStyle.rawValue, allowed: "current or legacy",
            parse: choice(StaticMapBuilder.Style.self),
            store: { $0.mapStyle = $1 }),
        Setting(
            "map-url", "ENRICH_MAP_URL", valueName: "url", help: "Static map base URL.", default: "per style",
            allowed: "a base URL", parse: { text -> String?? in trimmed(text).isEmpty ? .some(nil) : .some(text) },
            store: { $0.mapBaseURL = $1 }),
        Setting(
            "map-key", "ENRICH_MAP_KEY", valueName: "key", help: "Google Static Maps key.", default: "unset",
            allowed: "a non-empty key", secret: true, parse: { $0 }, store: { $0.mapKey = Secret($1) }),
        Setting(
            "map-signing-secret", "ENRICH_MAP_SIGNING_SECRET", valueName: "secret",
            help: "URL-signing secret for static maps.", default: "unset", allowed: "a non-empty secret",
            secret: true, parse: { $0 }, store: { $0.mapSigningSecret = Secret($1) }),
        Setting(
            "body-template", "ENRICH_BODY_TEMPLATE", valueName: "template",
            help: "Body template for default mode, e.g. '{{name}} is {{distance}} away'.",
            default: defaults.bodyTemplate, allowed: "a template", parse: { $0 },
            store: { $0.bodyTemplate = $1 }),
        Setting(
            "location-template", "ENRICH_LOCATION_TEMPLATE", valueName: "template",
            help: "Template for the location-only body, e.g. 'Near {{lat}}, {{lng}}'.",
            default: defaults.locationTemplate, allowed: "a template", parse: { $0 },
            store: { $0.locationTemplate = $1 }),
        Setting(
            "api-key", "ENRICH_API_KEY", valueName: "key",
            help: "Bearer token every endpoint but /health and /metrics requires.", default: "unset (no auth)",
            allowed: "a secret of printable characters with no newline, control character or surrounding space "
                + "(anything else could never match an Authorization header)",
            secret: true, parse: headerToken, store: { $0.apiKey = Secret($1) }),
        Setting(
            "max-body", "ENRICH_MAX_BODY", valueName: "bytes", help: "Largest JSON request body.",
            default: "\(defaults.maxBodyBytes)",
            allowed: "bytes >= 1024", parse: integer(1024...Int.max), store: { $0.maxBodyBytes = $1 }),
        Setting(
            "max-import", "ENRICH_MAX_IMPORT", valueName: "bytes", help: "Largest POI import body.",
            default: "\(defaults.maxImportBytes)", allowed: "bytes >= 1024", parse: integer(1024...Int.max),
            store: { $0.maxImportBytes = $1 }),
        Setting(
            "log-level", "ENRICH_LOG_LEVEL", valueName: "level", help: "Log level.",
            default: defaults.logLevel.rawValue,
            allowed: "trace, debug, info, notice, warning, error or critical", parse: choice(Logger.Level.self),
            store: { $0.logLevel = $1 }),
        Setting(
            "idle-timeout", "ENRICH_IDLE_TIMEOUT", valueName: "seconds",
            help: "A connection with no request under way is closed after this.",
            default: seconds(defaults.connections.idleTimeout),
            allowed: "seconds > 0 and at most 86400", parse: seconds(86_400),
            store: { $0.connections.idleTimeout = duration($1) }),
        Setting(
            "header-timeout", "ENRICH_HEADER_TIMEOUT", valueName: "seconds",
            help: "A request's line and headers must arrive within this from its first byte.",
            default: seconds(defaults.connections.headerTimeout),
            allowed: "seconds > 0 and at most 3600", parse: seconds(3_600),
            store: { $0.connections.headerTimeout = duration($1) }),
        Setting(
            "body-timeout", "ENRICH_BODY_TIMEOUT", valueName: "seconds",
            help: "A request's body must arrive within this after its headers.",
            default: seconds(defaults.connections.bodyTimeout),
            allowed: "seconds > 0 and at most 86400", parse: seconds(86_400),
            store: { $0.connections.bodyTimeout = duration($1) }),
        Setting(
            "max-connections", "ENRICH_MAX_CONNECTIONS", valueName: "count",
            help: "Most connections held at once; at the cap the longest-idle one is closed.",
            default: "the descriptor limit less 64", allowed: "an integer 1-1000000", parse: integer(1...1_000_000),
            store: { $0.connections.maxConnections = $1 }),
        Setting(
            "apps-file", "ENRICH_APPS_FILE", valueName: "path",
            help:
                "Several apps: a JSON file of credentials (.p8 keys, certificates, FCM service accounts) and apps "
                + "naming the ones they send with (docs/APPS.md); the ENRICH_APNS_* settings stay the default app's.",
            default: "unset (one app)", allowed: "a file path", parse: nonEmpty,
            store: { $0.delivery.appsFile = $1 }),
    ]

    /// Location intelligence: zones of interest, visits, regions, their retention and webhook.
    static let locationSettings: [Setting<ServiceConfiguration>] = [
        Setting(
            "zoi", "ENRICH_ZOI", valueName: "true|false",
            help: "Build zones of interest from accepted visits (the SDK's creationOfZOIEnable).",
            default: "\(defaults.location.zoiEnabled)", allowed: "true or false", parse: boolean,
            store: { $0.location.zoiEnabled = $1 }),
        Setting(
            "zoi-classification", "ENRICH_ZOI_CLASSIFICATION", valueName: "true|false",
            help: "Label zones home/work (the SDK's classificationEnable).",
            default: "\(defaults.location.classificationEnabled)", allowed: "true or false", parse: boolean,
            store: { $0.location.classificationEnabled = $1 }),
        Setting(
            "visit-accuracy-filter", "ENRICH_VISIT_ACCURACY_FILTER", valueName: "metres",
            help: "A visit needs horizontal_accuracy strictly below this.",
            default: "\(defaults.location.visitAccuracyFilter)", allowed: "metres > 0 and at most 100000",
            parse: { positive($0).flatMap { $0 <= 100_000 ? $0 : nil } },
            store: { $0.location.visitAccuracyFilter = $1 }),
        Setting(
            "classified-zoi-radius", "ENRICH_CLASSIFIED_ZOI_RADIUS", valueName: "metres",
            help: "A visit or fix this close to a home/work zone's centre is in it.",
            default: "\(defaults.location.classifiedZOIRadius)", allowed: "metres > 0 and at most 100000",
            parse: { positive($0).flatMap { $0 <= 100_000 ? $0 : nil } },
            store: { $0.location.classifiedZOIRadius = $1 }),
        Setting(
            "retention-days", "ENRICH_RETENTION_DAYS", valueName: "days",
            help: "Visits and location events older than this go in the daily clean-up.",
            default: "\(defaults.location.retentionDays)", allowed: "an integer 1-3650", parse: integer(1...3_650),
            store: { $0.location.retentionDays = $1 }),
        Setting(
            "detect-visits", "ENRICH_DETECT_VISITS", valueName: "true|false",
            help: "Detect visits from reported fixes.", default: "\(defaults.location.detectVisits)",
            allowed: "true or false", parse: boolean, store: { $0.location.detectVisits = $1 }),
        Setting(
            "visit-radius", "ENRICH_VISIT_RADIUS", valueName: "metres",
            help: "Detector: fixes within this of the stay's first fix stay in it.",
            default: "\(defaults.location.detector.radius)", allowed: "metres > 0 and at most 10000",
            parse: { positive($0).flatMap { $0 <= 10_000 ? $0 : nil } },
            store: { $0.location.detector.radius = $1 }),
        Setting(
            "visit-min-duration", "ENRICH_VISIT_MIN_DURATION", valueName: "seconds",
            help: "Detector: the shortest stay that is a visit.",
            default: "\(defaults.location.detector.minimumDuration)",
            allowed: "seconds > 0 and at most 86400", parse: seconds(86_400),
            store: { $0.location.detector.minimumDuration = $1 }),
        Setting(
            "visit-max-fix-accuracy", "ENRICH_VISIT_MAX_FIX_ACCURACY", valueName: "metres",
            help: "Detector: fixes less accurate than this are ignored.",
            default: "\(defaults.location.detector.maximumFixAccuracy)", allowed: "metres > 0 and at most 100000",
            parse: { positive($0).flatMap { $0 <= 100_000 ? $0 : nil } },
            store: { $0.location.detector.maximumFixAccuracy = $1 }),
        Setting(
            "visit-max-gap", "ENRICH_VISIT_MAX_GAP", valueName: "seconds",
            help: "Detector: a longer gap between fixes ends the stay.",
            default: "\(defaults.location.detector.maximumGap)", allowed: "seconds > 0 and at most 604800",
            parse: seconds(604_800), store: { $0.location.detector.maximumGap = $1 }),
        Setting(
            "regions", "ENRICH_REGIONS", valueName: "true|false",
            help: "Evaluate region enter/exit as fixes arrive.", default: "\(defaults.location.regionsEnabled)",
            allowed: "true or false", parse: boolean, store: { $0.location.regionsEnabled = $1 }),
        Setting(
            "poi-regions", "ENRICH_POI_REGIONS", valueName: "count",
            help: "Regions around this many nearest POIs of each fix (the SDK's stores_by_page); 0 turns them off.",
            default: "\(defaults.location.poiRegionsCount)", allowed: "an integer 0-5", parse: integer(0...5),
            store: {
                $0.location.poiRegionsEnabled = $1 > 0
                $0.location.poiRegionsCount = max($1, 1)
            }),
        Setting(
            "poi-region-radius", "ENRICH_POI_REGION_RADIUS", valueName: "metres",
            help: "Radius of the POI regions.", default: "\(defaults.location.poiRegionRadius)",
            allowed: "metres 1-100000", parse: { positive($0).flatMap { (1...100_000).contains($0) ? $0 : nil } },
            store: { $0.location.poiRegionRadius = $1 }),
        Setting(
            "custom-regions-per-device", "ENRICH_CUSTOM_REGIONS_PER_DEVICE", valueName: "count",
            help: "Most custom regions evaluated per fix (the nearest; iOS monitors 20, the SDK keeps 13).",
            default: "\(defaults.location.customRegionsPerDevice)", allowed: "an integer 1-1000",
            parse: integer(1...1_000), store: { $0.location.customRegionsPerDevice = $1 }),
        Setting(
            "location-webhook-url", "ENRICH_LOCATION_WEBHOOK_URL", valueName: "url",
            help: "Webhook that gets a JSON POST for each location event (visit, region and zone enter/exit).",
            default: "unset", allowed: "an http(s) URL", parse: httpURL, store: { $0.locationWebhookURL = $1 }),
    ]
}
