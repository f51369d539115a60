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
    public static let settings = SettingsTable<ServiceConfiguration>([
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
                "Several apps: a JSON file of credentials (.p8 keys, certificates) and apps naming the one they "
                + "send with (docs/APPS.md); the ENRICH_APNS_* settings stay the default app's.",
            default: "unset (one app)", allowed: "a file path", parse: nonEmpty,
            store: { $0.delivery.appsFile = $1 }),
        Setting(
            "apns-key-file", "ENRICH_APNS_KEY_FILE", valueName: "path",
            help: "APNs token authentication: the .p8 key file (with --apns-key-id and --apns-team-id).",
            default: "unset (delivery off)", allowed: "a file path", parse: nonEmpty,
            store: { $0.delivery.keyFile = $1 }),
        Setting(
            "apns-key-id", "ENRICH_APNS_KEY_ID", valueName: "id", help: "The .p8 key's 10-character key id.",
            default: "unset", allowed: "a key id", parse: nonEmpty, store: { $0.delivery.keyID = $1 }),
        Setting(
            "apns-team-id", "ENRICH_APNS_TEAM_ID", valueName: "id", help: "Your 10-character Apple team id.",
            default: "unset", allowed: "a team id", parse: nonEmpty, store: { $0.delivery.teamID = $1 }),
        Setting(
            "apns-cert", "ENRICH_APNS_CERT", valueName: "path",
            help: "APNs certificate authentication: the client certificate (PEM), with --apns-cert-key.",
            default: "unset", allowed: "a file path", parse: nonEmpty, store: { $0.delivery.certificateFile = $1 }),
        Setting(
            "apns-cert-key", "ENRICH_APNS_CERT_KEY", valueName: "path", help: "The private key (PEM) of --apns-cert.",
            default: "unset", allowed: "a file path", parse: nonEmpty,
            store: { $0.delivery.certificateKeyFile = $1 }),
        Setting(
            "apns-p12", "ENRICH_APNS_P12", valueName: "path",
            help: "APNs certificate authentication from a .p12 (password in ENRICH_APNS_P12_PASSWORD).",
            default: "unset", allowed: "a file path", parse: nonEmpty, store: { $0.delivery.p12File = $1 }),
        Setting(
            "apns-p12-password", "ENRICH_APNS_P12_PASSWORD", valueName: "password",
            help: "Password of the .p12.", default: "unset", allowed: "a password", secret: true, parse: { $0 },
            store: { $0.delivery.p12Password = Secret($1) }),
        Setting(
            "apns-sandbox-url", "ENRICH_APNS_SANDBOX_URL", valueName: "url",
            help: "Where sandbox registrations are sent (the mock's https://127.0.0.1:PORT in tests).",
            default: defaults.delivery.sandboxURL, allowed: "an https:// base URL", parse: httpsURL,
            store: { $0.delivery.sandboxURL = $1 }),
        Setting(
            "apns-production-url", "ENRICH_APNS_PRODUCTION_URL", valueName: "url",
            help: "Where production registrations are sent.", default: defaults.delivery.productionURL,
            allowed: "an https:// base URL", parse: httpsURL, store: { $0.delivery.productionURL = $1 }),
        Setting(
            "apns-channels-sandbox-url", "ENRICH_APNS_CHANNELS_SANDBOX_URL", valueName: "url",
            help: "Apple's channel management API for sandbox (broadcast channels, iOS 18).",
            default: "Apple's management host; the sandbox push host when ENRICH_APNS_SANDBOX_URL is set",
            allowed: "an https:// base URL", parse: httpsURL,
            store: { $0.delivery.channelsSandboxURL = $1 }),
        Setting(
            "apns-channels-production-url", "ENRICH_APNS_CHANNELS_PRODUCTION_URL", valueName: "url",
            help: "Apple's channel management API for production.",
            default: "Apple's management host; the production push host when ENRICH_APNS_PRODUCTION_URL is set",
            allowed: "an https:// base URL", parse: httpsURL,
            store: { $0.delivery.channelsProductionURL = $1 }),
        Setting(
            "apns-broadcast-sandbox-url", "ENRICH_APNS_BROADCAST_SANDBOX_URL", valueName: "url",
            help: "Where sandbox broadcasts go (Apple's examples use https://api-broadcast.sandbox.push.apple.com).",
            default: "the sandbox push host (ENRICH_APNS_SANDBOX_URL)", allowed: "an https:// base URL",
            parse: httpsURL,
            store: { $0.delivery.broadcastSandboxURL = $1 }),
        Setting(
            "apns-broadcast-production-url", "ENRICH_APNS_BROADCAST_PRODUCTION_URL", valueName: "url",
            help: "Where production broadcasts go (Apple's examples use https://api-broadcast.push.apple.com).",
            default: "the production push host (ENRICH_APNS_PRODUCTION_URL)", allowed: "an https:// base URL",
            parse: httpsURL,
            store: { $0.delivery.broadcastProductionURL = $1 }),
        Setting(
            "apns-ca", "ENRICH_APNS_CA", valueName: "path", help: "Extra CA certificate (PEM) to trust for APNs.",
            default: "unset", allowed: "a file path", parse: nonEmpty, store: { $0.delivery.caFile = $1 }),
        Setting(
            "apns-connections", "ENRICH_APNS_CONNECTIONS", valueName: "count",
            help: "HTTP/2 connections per APNs environment.", default: "\(defaults.delivery.connections)",
            allowed: "an integer 1-64", parse: integer(1...64), store: { $0.delivery.connections = $1 }),
        Setting(
            "apns-event-loops", "ENRICH_APNS_EVENT_LOOPS", valueName: "count",
            help: "Event loops (threads) the APNs connections are spread over; 0 is one per core.",
            default: "\(defaults.delivery.eventLoops)", allowed: "an integer 0-64", parse: integer(0...64),
            store: { $0.delivery.eventLoops = $1 }),
        Setting(
            "apns-ping-interval", "ENRICH_APNS_PING_INTERVAL", valueName: "seconds",
            help: "Silence after which an APNs connection sends a PING (keeps it open through NATs and proves it).",
            default: "\(defaults.delivery.pingInterval)", allowed: "seconds > 0 and at most 3600",
            parse: seconds(3_600), store: { $0.delivery.pingInterval = $1 }),
        Setting(
            "apns-ping-timeout", "ENRICH_APNS_PING_TIMEOUT", valueName: "seconds",
            help: "A PING unanswered this long closes the connection; its pushes go again on another.",
            default: "\(defaults.delivery.pingTimeout)", allowed: "seconds > 0 and at most 600",
            parse: seconds(600), store: { $0.delivery.pingTimeout = $1 }),
        Setting(
            "apns-concurrency", "ENRICH_APNS_CONCURRENCY", valueName: "count",
            help: "Deliveries in flight per lane (2 lanes), claimed in two batches of half this.",
            default: "\(defaults.delivery.concurrency)",
            allowed: "an integer 1-10000", parse: integer(1...10_000), store: { $0.delivery.concurrency = $1 }),
        Setting(
            "apns-attempts", "ENRICH_APNS_ATTEMPTS", valueName: "count",
            help: "Attempts per delivery (429, 5xx and lost connections are retried; permanent reasons never).",
            default: "\(defaults.delivery.attempts)", allowed: "an integer 1-50", parse: integer(1...50),
            store: { $0.delivery.attempts = $1 }),
        Setting(
            "apns-retry-delay", "ENRICH_APNS_RETRY_DELAY", valueName: "seconds",
            help: "Delay before the second attempt; doubled for each further one.",
            default: "\(defaults.delivery.retryDelay)", allowed: "seconds > 0 and at most 3600",
            parse: seconds(3_600), store: { $0.delivery.retryDelay = $1 }),
        Setting(
            "apns-probe-interval", "ENRICH_APNS_PROBE_INTERVAL", valueName: "seconds",
            help:
                "While APNs is unreachable, the longest pause between two probes (from ENRICH_APNS_RETRY_DELAY, doubled, with jitter).",
            default: "\(defaults.delivery.probeInterval)", allowed: "seconds > 0 and at most 3600",
            parse: seconds(3_600), store: { $0.delivery.probeInterval = $1 }),
        Setting(
            "delivery-max-age", "ENRICH_DELIVERY_MAX_AGE", valueName: "seconds",
            help:
                "How long a push without apns-expiration may wait for APNs (an outage) before its deliveries end expired.",
            default: "\(defaults.delivery.maximumAge)", allowed: "seconds > 0 and at most 2592000 (30 days)",
            parse: seconds(2_592_000), store: { $0.delivery.maximumAge = $1 }),
        Setting(
            "apns-timeout", "ENRICH_APNS_TIMEOUT", valueName: "seconds", help: "Longest wait for one APNs answer.",
            default: "\(defaults.delivery.requestTimeout)", allowed: "seconds > 0 and at most 600",
            parse: seconds(600), store: { $0.delivery.requestTimeout = $1 }),
        Setting(
            "push-wait-timeout", "ENRICH_PUSH_WAIT_TIMEOUT", valueName: "seconds",
            help:
                "Longest a \"wait\": true push request waits before answering 202 with its push id (and a GET /v1/push/{id}?wait= before answering its progress).",
            default: "\(defaults.delivery.waitTimeout)", allowed: "seconds > 0 and at most 600",
            parse: seconds(600), store: { $0.delivery.waitTimeout = $1 }),
        Setting(
            "push-retention", "ENRICH_PUSH_RETENTION", valueName: "seconds",
            help:
                "How long a finished push (its deliveries, devices and receipts) is kept after it was made; then it is deleted, in small batches.",
            default: "\(defaults.delivery.retention)", allowed: "seconds > 0 and at most 315360000 (10 years)",
            parse: seconds(315_360_000), store: { $0.delivery.retention = $1 }),
        Setting(
            "max-push-audience", "ENRICH_MAX_PUSH_AUDIENCE", valueName: "devices",
            help: "Most devices one push may reach (an audience, or the devices of an open push).",
            default: "\(defaults.delivery.maximumAudience)", allowed: "an integer from 1 to 100000000",
            parse: integer(1...100_000_000), store: { $0.delivery.maximumAudience = $1 }),
        Setting(
            "resolve-chunk", "ENRICH_RESOLVE_CHUNK", valueName: "devices",
            help:
                "Devices an audience's background resolution commits per transaction (with their deliveries and its cursor).",
            default: "\(defaults.delivery.resolveChunk)", allowed: "an integer from 100 to 100000",
            parse: integer(100...100_000), store: { $0.delivery.resolveChunk = $1 }),
        Setting(
            "open-push-idle", "ENRICH_OPEN_PUSH_IDLE", valueName: "seconds",
            help:
                "How long an open push (\"open\": true, devices added by POST /v1/push/{id}/devices) stays open with no device added; then it closes itself and is done once its deliveries are final.",
            default: "\(defaults.delivery.openPushIdle)", allowed: "seconds > 0 and at most 604800 (7 days)",
            parse: seconds(604_800), store: { $0.delivery.openPushIdle = $1 }),
        Setting(
            "delivery-lease", "ENRICH_DELIVERY_LEASE", valueName: "seconds",
            help: "How long a node's claim on a delivery lasts; a dead node's claims are sent by another after it.",
            default: "\(defaults.delivery.lease)", allowed: "seconds > 0 and at most 3600", parse: seconds(3_600),
            store: { $0.delivery.lease = $1 }),
        Setting(
            "feedback-url", "ENRICH_FEEDBACK_URL", valueName: "url",
            help: "Webhook that gets a JSON POST for each token deactivation.", default: "unset",
            allowed: "an http(s) URL", parse: httpURL, store: { $0.delivery.feedbackURL = $1 }),
        Setting(
            "default-time-zone", "ENRICH_DEFAULT_TIME_ZONE", valueName: "zone",
            help: "The default app's time zone for devices without one (local_time, quiet hours).",
            default: "unset", allowed: "an IANA zone name such as Europe/Paris",
            parse: { ZoneClock.zone(named: trimmed($0)) != nil ? trimmed($0) : nil },
            store: { $0.delivery.defaultTimeZone = $1 }),
        Setting(
            "frequency-cap", "ENRICH_FREQUENCY_CAP", valueName: "max/seconds",
            help: "The default app's frequency cap: at most MAX pushes per device within SECONDS (e.g. 3/86400).",
            default: "unset (not capped)", allowed: "MAX/SECONDS, MAX 1 to 1000, SECONDS 60 to 31536000",
            parse: frequencyCap, store: { $0.delivery.frequencyCap = $1 }),
        Setting(
            "push-callback-hosts", "ENRICH_PUSH_CALLBACK_HOSTS", valueName: "hosts",
            help: "Hosts a push's callback_url may name (its report is posted there once every delivery is final).",
            default: "unset (no callbacks)", allowed: "comma-separated host names or IP addresses",
            parse: hostList, store: { $0.delivery.callbackHosts = $1 }),
        Setting(
            "push-callback-secret", "ENRICH_PUSH_CALLBACK_SECRET", valueName: "secret",
            help: "Key of the HMAC-SHA256 signature each push callback carries (Enrich-Signature).",
            default: "unset (unsigned)", allowed: "a non-empty key of at least 16 characters", secret: true,
            parse: { $0.count >= 16 ? $0 : nil }, store: { $0.delivery.callbackSecret = Secret($1) }),
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
    ])

    /// The values a configuration starts with: the defaults shown in help come from here, not from copies.
    private static let defaults = ServiceConfiguration()

    private static func seconds(_ duration: Duration) -> String {
        let components = duration.components
        return "\(Double(components.seconds) + Double(components.attoseconds) / 1e18)"
    }

    private static func trimmed(_ text: String) -> String { text.trimmingCharacters(in: .whitespaces) }

    private static func nonEmpty(_ text: String) -> String? {
        let value = trimmed(text)
        return value.isEmpty ? nil : value
    }

    /// A value that can be sent in, and matched against, an HTTP header: visible ASCII and inner spaces only.
    /// A newline or other control character could never arrive in a header, and HTTP strips surrounding spaces.
    static func headerToken(_ text: String) -> String? {
        guard let first = text.utf8.first, let last = text.utf8.last, first != 0x20, last != 0x20 else { return nil }
        return text.utf8.allSatisfy { (0x20...0x7E).contains($0) } ? text : nil
    }

    private static func integer(_ range: ClosedRange<Int>) -> @Sendable (String) -> Int? {
        { text in Int(trimmed(text)).flatMap { range.contains($0) ? $0 : nil } }
    }

    private static func positive(_ text: String) -> Double? {
        guard let number = Double(trimmed(text)), number.isFinite, number > 0 else { return nil }
        return number
    }

    private static func seconds(_ maximum: Double) -> @Sendable (String) -> Double? {
        { text in positive(text).flatMap { $0 <= maximum ? $0 : nil } }
    }

    private static func duration(_ seconds: Double) -> Duration { .milliseconds(Int64(seconds * 1000)) }

    private static func boolean(_ text: String) -> Bool? { bool(trimmed(text)) }

    private static func choice<Value: RawRepresentable<String> & SendableMetatype>(_: Value.Type)
        -> @Sendable (String) -> Value?
    {
        { Value(rawValue: trimmed($0)) }
    }

    private static func list(_ text: String) -> [String]? {
        text.split(separator: ",").map { trimmed(String($0)) }.filter { !$0.isEmpty }
    }

    private static func httpsURL(_ text: String) -> String? {
        httpURL(text).flatMap { $0.hasPrefix("https://") ? $0 : nil }
    }

    private static func frequencyCap(_ text: String) -> FrequencyCap? {
        let parts = trimmed(text).split(separator: "/")
        guard parts.count == 2, let max = Int(parts[0]), (1...1_000).contains(max), let window = Double(parts[1]),
            (60...31_536_000).contains(window)
        else { return nil }
        return FrequencyCap(max: max, window: window)
    }

    private static func hostList(_ text: String) -> [String]? {
        let hosts = text.split(separator: ",").map { trimmed(String($0)).lowercased() }
        guard !hosts.isEmpty,
            hosts.allSatisfy({ host in
                !host.isEmpty && host.unicodeScalars.allSatisfy { $0.isASCII && !" /?#@".unicodeScalars.contains($0) }
            })
        else { return nil }
        return hosts
    }

    /// An http(s) URL the service may call: `OutboundURL`'s rules (a port from 1 to 65535, printable ASCII, no
    /// credentials in it), so a mistyped setting stops the start with its name rather than trapping on first use.
    private static func httpURL(_ text: String) -> String? {
        let value = trimmed(text)
        return OutboundURL.isValid(value) ? value : nil
    }
}
