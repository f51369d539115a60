public import APNsCore
public import Delivery
public import EnrichmentCore
import EnrichmentPostgres
public import EnrichmentStorage
public import Essentials
import Foundation
public import LocationCore
public import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Everything the service can be told, with the documented defaults; read from the environment, then flags.
public struct ServiceConfiguration: Sendable {
    /// Which places provider the enricher uses.
    public enum PlacesSource: String, Sendable, CaseIterable {
        /// The in-memory index over the SQLite POI table (default).
        case local
        /// The Woosmap Search API (or a compatible endpoint) at `woosmapBaseURL`.
        case woosmap
        /// No places search (woosmap's "map only"/"neither" modes).
        case none
    }

    public var host = "127.0.0.1"
    public var port = 8080
    public var databasePath = "data/enrichment.sqlite"
    /// `postgres://user:password@host:port/database[?sslmode=disable|prefer|require&sslrootcert=ca.pem]`: every
    /// store in PostgreSQL (several nodes may share it); nil keeps the embedded SQLite file.
    public var databaseURL: Secret?
    /// Most connections each node opens to PostgreSQL.
    public var databasePoolSize = 20
    /// Seconds to wait for a PostgreSQL connection.
    public var databaseConnectTimeout = 10.0
    /// Seconds `GET /health/ready` waits for the database before it answers 503: below the 1 s a load balancer's
    /// or Kubernetes' probe waits by default, whatever the database does.
    public var readyTimeout = 0.8
    /// Seconds start-up keeps trying a PostgreSQL that refuses connections (a warning per try) before it exits.
    public var databaseWait = 30.0
    /// Seconds between an idle node's looks for work no notification announced (per kind of work).
    public var pollInterval = 1.0
    /// Devices each per-device cache keeps (LRU); docs/SCALING.md, "Memory".
    public var deviceMemory = 200_000
    /// Where traces are exported over OTLP/HTTP; nil: tracing off.
    public var otlpEndpoint: String?
    public var durability: SQLiteDatabase.Durability = .normal
    /// Load the bundled sample POIs when the POI table is empty.
    public var loadSamplePOIs = true
    /// Answer `POST /v1/enrich` on the connection's event loop when it can be answered from memory (the same
    /// answer as the router's, for less CPU); false sends every request through the router.
    public var enrichOnEventLoop = true
    public var mode: BodyMode = .default
    public var stalenessWindow: Int64 = 300
    public var maxFutureSkew: Int64?
    public var fixMaxAge: Double = 3600
    public var places: PlacesSource = .local
    public var woosmapBaseURL = "https://api.woosmap.com"
    public var woosmapKey: Secret?
    public var placesLimit = 5
    public var placesRadius: Double?
    public var placesTypes: [String] = []
    public var placesTags: [String] = []
    /// A Woosmap-syntax filter applied to every places search (`ENRICH_PLACES_QUERY`).
    public var placesQuery: PlaceFilter?
    /// Seconds one upstream request may take.
    public var upstreamTimeout: Double = 1.0
    /// Seconds the whole places step may take before the result is `degraded`.
    public var deadline: Double = 2.0
    public var mapEnabled = true
    public var mapStyle: StaticMapBuilder.Style = .current
    public var mapBaseURL: String?
    public var mapKey: Secret?
    public var mapSigningSecret: Secret?
    public var bodyTemplate = BodyTemplate.defaultPOITemplate
    public var locationTemplate = BodyTemplate.defaultLocationTemplate
    /// When set, every endpoint but `/health` and `/metrics` needs `Authorization: Bearer <apiKey>`.
    public var apiKey: Secret?
    /// Largest accepted JSON request body, bytes.
    public var maxBodyBytes = 1 << 20
    /// Largest accepted POI import body, bytes.
    public var maxImportBytes = 64 << 20
    public var logLevel: Logger.Level = .info
    /// Where the stores live, for logs: the SQLite path, or the PostgreSQL URL without its password.
    public var databaseDescription: String {
        guard let databaseURL else { return databasePath }
        return (try? PostgresSettings(url: databaseURL.exposed).description) ?? "postgres (invalid URL)"
    }

    /// Connection deadlines (idle, header read, body read) and the connection cap.
    public var connections = ConnectionLimits()
    /// Delivery to APNs (`POST /v1/push`): credentials, hosts, connections, retries, the feedback webhook.
    public var delivery = DeliverySettings()
    /// Visits, zones of interest and regions (docs/LOCATION-RULES.md).
    public var location = LocationSettings()
    /// Where location events are posted, when set.
    public var locationWebhookURL: String?

    public init() {}

    /// Applies `ENRICH_*` variables over the defaults; throws naming the variable and what is allowed.
    public mutating func apply(environment: [String: String]) throws(ConfigurationError) {
        try Self.settings.apply(environment: environment, to: &self)
    }

    /// Applies `--flag value` arguments (flags win over variables); throws naming the flag as typed.
    public mutating func apply(arguments: [String]) throws(ConfigurationError) {
        try Self.settings.apply(arguments: arguments, to: &self)
    }

    /// The defaults, then the `ENRICH_*` variables of `environment`, then `options` (flag name without dashes to
    /// value; nil values are skipped): how a command that takes a few settings as its own options reads the rest.
    public static func resolve(
        environment: [String: String], options: KeyValuePairs<String, String?> = [:]
    ) throws(ConfigurationError) -> ServiceConfiguration {
        var configuration = ServiceConfiguration()
        try configuration.apply(environment: environment)
        for case (let name, let value?) in options { try configuration.apply(arguments: ["--\(name)", value]) }
        return configuration
    }

    /// Sets one setting by its environment variable's name.
    public mutating func set(_ variable: String, _ raw: String) throws(ConfigurationError) {
        guard let setting = Self.settings.setting(variable: variable) else {
            throw ConfigurationError(setting: variable, value: raw, allowed: "a known ENRICH_* setting")
        }
        try setting.apply(raw, to: &self, origin: variable)
    }

    /// The variables whose values are secrets: never echoed in errors or logs, never read from flags.
    public static var secretVariables: [String] { settings.settings.filter(\.isSecret).map(\.variable) }

    static func bool(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "1", "true", "yes", "on": true
        case "0", "false", "no", "off": false
        default: nil
        }
    }

    /// The filter every places search applies: the types and tags shorthands and the query, all required.
    public var placesFilter: PlaceFilter? {
        PlaceFilter.combining(types: placesTypes, tags: placesTags, query: placesQuery)
    }

    /// Checks combinations that single settings cannot (e.g. woosmap places without a key).
    public func validate() throws(ConfigurationError) {
        let secrets: [(String, Secret?)] = [
            ("ENRICH_API_KEY", apiKey), ("ENRICH_WOOSMAP_KEY", woosmapKey),
            ("ENRICH_MAP_KEY", mapKey), ("ENRICH_MAP_SIGNING_SECRET", mapSigningSecret),
            ("ENRICH_APNS_P12_PASSWORD", delivery.p12Password),
        ]
        for case (let setting, let value?) in secrets where value.isBlank {
            throw ConfigurationError(
                setting: setting, value: "<empty>",
                allowed: "a non-empty secret; unset the variable to run without it")
        }
        try delivery.validate()
        if let databaseURL {
            do { _ = try PostgresSettings(url: databaseURL.exposed) } catch {
                throw ConfigurationError(
                    setting: "ENRICH_DATABASE_URL", value: "<not shown: it may hold a password>",
                    allowed: "postgres://user:password@host:5432/database", problem: error.description)
            }
        }
        if places == .woosmap, woosmapKey == nil, !Self.isLoopback(woosmapBaseURL) {
            throw ConfigurationError(
                setting: "ENRICH_WOOSMAP_KEY", value: "", allowed: "a Woosmap private key when ENRICH_PLACES=woosmap")
        }
    }

    static func isLoopback(_ url: String) -> Bool {
        guard let host = URL(string: url)?.host else { return false }
        return host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
    }

    /// A one-line summary for the start-up log, with every secret replaced by whether it is set.
    public var redactedSummary: String {
        "listen=\(host):\(port) db=\(databaseDescription) durability=\(durability.rawValue) mode=\(mode.rawValue) window=\(stalenessWindow)s "
            + "future_skew=\(maxFutureSkew.map { "\($0)s" } ?? "off") fix_max_age=\(fixMaxAge)s places=\(places.rawValue) "
            + "places_limit=\(placesLimit) timeout=\(upstreamTimeout)s deadline=\(deadline)s map=\(mapEnabled ? mapStyle.rawValue : "none") "
            + "woosmap_key=\(woosmapKey == nil ? "unset" : "set") map_key=\(mapKey == nil ? "unset" : "set") "
            + "map_signing=\(mapSigningSecret == nil ? "off" : "on") auth=\(apiKey == nil ? "off" : "bearer") "
            + "idle_timeout=\(connections.idleTimeout) header_timeout=\(connections.headerTimeout) "
            + "body_timeout=\(connections.bodyTimeout) max_connections=\(connections.maxConnections) "
            + delivery.redactedSummary
    }
}

/// Connection deadlines and the connection cap of the HTTP server.
public struct ConnectionLimits: Sendable, Equatable {
    /// A connection with no request under way (before its first one, or after a response) is closed after this.
    public var idleTimeout: Duration = .seconds(60)
    /// A request's line and headers must have arrived this long after its first byte.
    public var headerTimeout: Duration = .seconds(10)
    /// A request's body must have arrived this long after its headers (a 64 MiB import at 2 MB/s fits).
    public var bodyTimeout: Duration = .seconds(60)
    /// Most connections held at once. At the cap, a new connection closes the longest-waiting connection that has
    /// no request under way (idle, or still sending headers); when every one is busy it gets a 503 and is closed.
    public var maxConnections: Int = ConnectionLimits.defaultMaxConnections

    public init() {}

    /// The descriptor limit of the process less a reserve for the database, upstream clients and logs
    /// (at least 16, at most 100,000).
    public static var defaultMaxConnections: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1_000 }
        let descriptors = limit.rlim_cur == rlim_t.max ? 100_064 : Int(clamping: limit.rlim_cur)
        return min(100_000, max(16, descriptors - 64))
    }
}

/// How the service delivers pushes to APNs.
public struct DeliverySettings: Sendable {
    /// Token authentication: the `.p8` key file, its key id, the team id.
    public var keyFile: String?
    public var keyID: String?
    public var teamID: String?
    /// Certificate authentication: a PEM certificate and key, or a PKCS#12 file (password from the environment).
    public var certificateFile: String?
    public var certificateKeyFile: String?
    public var p12File: String?
    public var p12Password: Secret?
    /// The apps file (several apps, each with its credential); read at start-up into `apps`.
    public var appsFile: String?
    /// The apps the file declares (nil without one): a push to an app's bundle id goes out with its credential.
    public var apps: AppsConfiguration?
    /// Apple's channel management API (broadcast channels, iOS 18), per environment; nil: `channelsURL(for:)`'s
    /// default.
    public var channelsSandboxURL: String?
    public var channelsProductionURL: String?
    /// Where broadcasts go; nil: the environment's push host (Apple's text names the push hosts; its examples name
    /// api-broadcast[.sandbox], docs/LIVE-ACTIVITIES.md).
    public var broadcastSandboxURL: String?
    public var broadcastProductionURL: String?
    /// Apple's channel management hosts.
    public static let appleChannelsSandboxURL = "https://api-manage-broadcast.sandbox.push.apple.com:2195"
    public static let appleChannelsProductionURL = "https://api-manage-broadcast.push.apple.com:2196"

    /// Where an environment's pushes go.
    public func pushURL(for environment: APNsEnvironmentName) -> String {
        environment == .sandbox ? sandboxURL : productionURL
    }

    /// Where an environment's channel requests go: as set; else Apple's management host while pushes go to
    /// Apple, and the push host when that was moved (a local mock serves pushes, channels and broadcasts on one
    /// port): never Apple's hosts for channels while pushes go to a mock.
    public func channelsURL(for environment: APNsEnvironmentName) -> String {
        if let set = environment == .sandbox ? channelsSandboxURL : channelsProductionURL { return set }
        let push = pushURL(for: environment)
        guard push == environment.baseURL else { return push }
        return environment == .sandbox ? Self.appleChannelsSandboxURL : Self.appleChannelsProductionURL
    }

    /// Where an environment's broadcasts go: as set, else its push host.
    public func broadcastURL(for environment: APNsEnvironmentName) -> String {
        (environment == .sandbox ? broadcastSandboxURL : broadcastProductionURL) ?? pushURL(for: environment)
    }
    public var sandboxURL = APNsEnvironmentName.sandbox.baseURL
    public var productionURL = APNsEnvironmentName.production.baseURL
    /// An extra CA (PEM file) to trust, e.g. the mock's.
    public var caFile: String?
    /// The `default` app's FCM service account (a Google key file); other apps name theirs in the apps file.
    public var fcmServiceAccountFile: String?
    /// FCM's base URL (a local FCM's in tests and demos).
    public var fcmURL = APNsEnvironmentName.fcm.baseURL
    /// An extra CA (PEM file) to trust for FCM, e.g. the local FCM's.
    public var fcmCAFile: String?
    /// HTTP/2 connections per APNs environment.
    public var connections = 1
    /// Event loops the connections are spread over (0: one per core, never more than the connections).
    public var eventLoops = 0
    /// Seconds of silence after which a connection sends a PING; one unanswered for `pingTimeout` closes it and
    /// its pushes go again on another connection.
    public var pingInterval = 60.0
    public var pingTimeout = 10.0
    /// Deliveries in flight per lane (2 lanes), claimed in two batches of half this: one batch's answers come back
    /// while the next is claimed and enriched.
    public var concurrency = 1000
    /// Attempts per delivery in all; 429, 5xx and transport failures are retried with backoff.
    public var attempts = 5
    /// Seconds before the second attempt; doubled for each further one, at most `maxRetryDelay`.
    public var retryDelay = 1.0
    public var maxRetryDelay = 300.0
    /// Seconds one APNs answer may take.
    public var requestTimeout = 30.0
    /// Longest pause between two probes of an unreachable APNs peer (the circuit's backoff starts at
    /// `retryDelay` and doubles up to this).
    public var probeInterval = 30.0
    /// Seconds a push without `apns-expiration` may wait for APNs before its deliveries end `expired`.
    public var maximumAge = 3_600.0
    /// Longest a `"wait": true` request waits for its deliveries before answering 202 with the push id.
    public var waitTimeout = 30.0
    /// Seconds a finished push (its deliveries, devices and receipts) is kept after it was made; then deleted.
    public var retention = 2_592_000.0
    /// Most devices one push may reach (an audience's members, or `device_ids` added to an open push).
    public var maximumAudience = 10_000_000
    /// Devices an audience's resolution commits in one transaction (with their deliveries and the cursor).
    public var resolveChunk = 1_000
    /// Seconds an open push stays open with no device added; then it closes itself (as `POST .../close` does).
    public var openPushIdle = 3_600.0
    /// Where each token deactivation is POSTed as JSON (bounded retries, never blocks sending).
    public var feedbackURL: String?
    /// The default app's zone for devices without one (apps of the apps file have `time_zone`).
    public var defaultTimeZone: String?
    /// The default app's frequency cap (apps of the apps file have `frequency_cap`).
    public var frequencyCap: FrequencyCap?
    /// The hosts a push's `callback_url` may name (lower case; empty: pushes may not ask for a callback).
    public var callbackHosts: [String] = []
    /// When set, each callback carries `Enrich-Signature: sha256=<HMAC-SHA256 of the body, hex>` with this key.
    public var callbackSecret: Secret?
    /// Seconds a node's claim on a delivery lasts: after a node dies, another sends its claimed deliveries once
    /// this has passed.
    public var lease = 60.0
    /// Seconds between two writes of a batch's answers while they arrive (the last answer is written at once): a
    /// crash resends what was answered in the last interval. Not a setting of the environment.
    public var recordInterval = 0.02

    public init() {}

    /// True when credentials are configured, i.e. `POST /v1/push` can send.
    public var isConfigured: Bool {
        keyFile != nil || certificateFile != nil || p12File != nil || fcmServiceAccountFile != nil
            || apps.map { !$0.apps.isEmpty } ?? (appsFile != nil)
    }
    /// True when an APNs credential is configured (the `ENRICH_APNS_*` settings, or an app of the apps file with a
    /// `credential`); a service account alone sends to Android devices only.
    public var hasAPNsCredentials: Bool {
        keyFile != nil || certificateFile != nil || p12File != nil
            || apps.map { $0.apps.contains { $0.credential != nil } } ?? (appsFile != nil)
    }
    /// True with a .p8 key (token authentication), which Live Activity pushes need.
    public var usesTokenAuthentication: Bool { keyFile != nil && keyID != nil && teamID != nil }

    /// Checks that the credential settings form one complete method.
    public func validate() throws(ConfigurationError) {
        let token = keyFile != nil || keyID != nil || teamID != nil
        let certificate = certificateFile != nil || certificateKeyFile != nil || p12File != nil
        if token && certificate {
            throw ConfigurationError(
                setting: "ENRICH_APNS_KEY_FILE", value: keyFile ?? "",
                allowed: "token authentication (ENRICH_APNS_KEY_FILE, _KEY_ID, _TEAM_ID) or a certificate "
                    + "(ENRICH_APNS_CERT and _CERT_KEY, or ENRICH_APNS_P12), not both")
        }
        if token, keyFile == nil || keyID == nil || teamID == nil {
            let missing = [
                ("ENRICH_APNS_KEY_FILE", keyFile), ("ENRICH_APNS_KEY_ID", keyID), ("ENRICH_APNS_TEAM_ID", teamID),
            ].first { $0.1 == nil }!.0
            throw ConfigurationError(
                setting: missing, value: "",
                allowed:
                    "all of ENRICH_APNS_KEY_FILE, ENRICH_APNS_KEY_ID and ENRICH_APNS_TEAM_ID for token authentication")
        }
        if certificateFile != nil, certificateKeyFile == nil {
            throw ConfigurationError(
                setting: "ENRICH_APNS_CERT_KEY", value: "", allowed: "the PEM private key of ENRICH_APNS_CERT")
        }
        if certificateKeyFile != nil, certificateFile == nil {
            throw ConfigurationError(
                setting: "ENRICH_APNS_CERT", value: "", allowed: "the PEM certificate ENRICH_APNS_CERT_KEY belongs to")
        }
    }

    var redactedSummary: String {
        let auth = keyFile != nil ? "token" : (certificateFile != nil || p12File != nil) ? "certificate" : "off"
        return
            "apns=\(auth) fcm=\(fcmServiceAccountFile == nil ? "off" : "on") apps_file=\(appsFile ?? "none") apns_sandbox=\(sandboxURL) apns_production=\(productionURL) "
            + "apns_connections=\(connections) apns_concurrency=\(concurrency) apns_attempts=\(attempts) "
            + "feedback=\(feedbackURL == nil ? "off" : "on")"
    }
}
