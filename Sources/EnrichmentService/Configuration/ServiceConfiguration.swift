import EnrichmentCore
import EnrichmentStorage
import Foundation
import Logging

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
    public var durability: SQLiteDatabase.Durability = .normal
    /// Load the bundled sample POIs when the POI table is empty.
    public var loadSamplePOIs = true
    public var mode: BodyMode = .default
    public var stalenessWindow: Int64 = 300
    public var maxFutureSkew: Int64?
    public var fixMaxAge: Double = 3600
    public var places: PlacesSource = .local
    public var woosmapBaseURL = "https://api.woosmap.com"
    public var woosmapKey: String?
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
    public var mapKey: String?
    public var mapSigningSecret: String?
    public var bodyTemplate = BodyTemplate.defaultPOITemplate
    public var locationTemplate = BodyTemplate.defaultLocationTemplate
    /// When set, every endpoint but `/health` and `/metrics` needs `Authorization: Bearer <apiKey>`.
    public var apiKey: String?
    /// Largest accepted JSON request body, bytes.
    public var maxBodyBytes = 1 << 20
    /// Largest accepted POI import body, bytes.
    public var maxImportBytes = 64 << 20
    public var logLevel: Logger.Level = .info
    /// Connection deadlines (idle, header read, body read) and the connection cap.
    public var connections = ConnectionLimits()

    public init() {}

    /// The environment variables read, each mapped to the flag of the same meaning (documented in the README).
    public static let environmentKeys = [
        "ENRICH_HOST", "ENRICH_PORT", "ENRICH_DB", "ENRICH_DURABILITY", "ENRICH_SAMPLE_POIS", "ENRICH_MODE",
        "ENRICH_STALENESS_WINDOW", "ENRICH_MAX_FUTURE_SKEW", "ENRICH_FIX_MAX_AGE", "ENRICH_PLACES",
        "ENRICH_WOOSMAP_URL", "ENRICH_WOOSMAP_KEY", "ENRICH_PLACES_LIMIT", "ENRICH_PLACES_RADIUS", "ENRICH_PLACES_QUERY",
        "ENRICH_PLACES_TYPES", "ENRICH_PLACES_TAGS", "ENRICH_UPSTREAM_TIMEOUT", "ENRICH_DEADLINE", "ENRICH_MAP",
        "ENRICH_MAP_STYLE", "ENRICH_MAP_URL", "ENRICH_MAP_KEY", "ENRICH_MAP_SIGNING_SECRET", "ENRICH_BODY_TEMPLATE",
        "ENRICH_LOCATION_TEMPLATE", "ENRICH_API_KEY", "ENRICH_MAX_BODY", "ENRICH_MAX_IMPORT", "ENRICH_LOG_LEVEL",
        "ENRICH_IDLE_TIMEOUT", "ENRICH_HEADER_TIMEOUT", "ENRICH_BODY_TIMEOUT", "ENRICH_MAX_CONNECTIONS",
    ]

    /// Applies `ENRICH_*` variables over the defaults; throws naming the variable and what is allowed.
    public mutating func apply(environment: [String: String]) throws(ConfigurationError) {
        for key in Self.environmentKeys {
            guard let value = environment[key] else { continue }
            try set(key, value)
        }
    }

    /// Sets one setting by its environment name (flags use the same path so both validate alike).
    public mutating func set(_ key: String, _ raw: String) throws(ConfigurationError) {
        let value = raw.trimmingCharacters(in: .whitespaces)
        func fail(_ allowed: String) -> ConfigurationError {
            ConfigurationError(setting: key, value: Self.secretKeys.contains(key) ? "<redacted>" : value, allowed: allowed)
        }
        func positive(_ allowed: String) throws(ConfigurationError) -> Double {
            guard let number = Double(value), number.isFinite, number > 0 else { throw fail(allowed) }
            return number
        }
        func list() -> [String] { value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
        func optional() -> String? { value.isEmpty ? nil : raw }
        func secret() throws(ConfigurationError) -> String {
            // Set but empty is a mistake (an unexpanded variable, a missing file), never "no secret".
            guard !value.isEmpty else {
                throw ConfigurationError(setting: key, value: "<empty>",
                                         allowed: "a non-empty secret; unset the variable to run without it")
            }
            return raw
        }
        func seconds(_ range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
            guard let number = Double(value), number.isFinite, range.contains(number), number > 0 else {
                throw fail("seconds > 0 and at most \(Int(range.upperBound))")
            }
            return number
        }
        switch key {
        case "ENRICH_HOST": guard !value.isEmpty else { throw fail("a host name or IP address") }; host = value
        case "ENRICH_PORT":
            guard let port = Int(value), (0...65535).contains(port) else { throw fail("an integer port 0-65535 (0 picks a free port)") }
            self.port = port
        case "ENRICH_DB": guard !value.isEmpty else { throw fail("a file path") }; databasePath = value
        case "ENRICH_DURABILITY":
            guard let durability = SQLiteDatabase.Durability(rawValue: value) else { throw fail("normal or full") }
            self.durability = durability
        case "ENRICH_SAMPLE_POIS":
            guard let flag = Self.bool(value) else { throw fail("true or false") }
            loadSamplePOIs = flag
        case "ENRICH_MODE":
            guard let mode = BodyMode(rawValue: value) else { throw fail("default or woosmap") }
            self.mode = mode
        case "ENRICH_STALENESS_WINDOW":
            guard let seconds = Int64(value), seconds >= 0 else { throw fail("whole seconds >= 0") }
            stalenessWindow = seconds
        case "ENRICH_MAX_FUTURE_SKEW":
            if value.isEmpty || value == "off" { maxFutureSkew = nil; return }
            guard let seconds = Int64(value), seconds >= 0 else { throw fail("whole seconds >= 0, or off") }
            maxFutureSkew = seconds
        case "ENRICH_FIX_MAX_AGE": fixMaxAge = try positive("seconds > 0")
        case "ENRICH_PLACES":
            guard let places = PlacesSource(rawValue: value) else { throw fail("local, woosmap or none") }
            self.places = places
        case "ENRICH_WOOSMAP_URL":
            guard let url = URL(string: value), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                throw fail("an http(s) base URL such as https://api.woosmap.com")
            }
            woosmapBaseURL = value
        case "ENRICH_WOOSMAP_KEY": woosmapKey = try secret()
        case "ENRICH_PLACES_LIMIT":
            guard let limit = Int(value), (1...300).contains(limit) else { throw fail("an integer 1-300") }
            placesLimit = limit
        case "ENRICH_PLACES_RADIUS": placesRadius = value.isEmpty ? nil : try positive("metres > 0")
        case "ENRICH_PLACES_TYPES": placesTypes = list()
        case "ENRICH_PLACES_TAGS": placesTags = list()
        case "ENRICH_PLACES_QUERY":
            if value.isEmpty { placesQuery = nil; return }
            do throws(PlaceFilterSyntaxError) { placesQuery = try PlaceFilter.parse(value) } catch {
                throw ConfigurationError(setting: key, value: value,
                                         allowed: "a Woosmap query such as type:\"cafe\" AND user.rating:>=4 (\(error.description))")
            }
        case "ENRICH_UPSTREAM_TIMEOUT": upstreamTimeout = try seconds(0...600)
        case "ENRICH_DEADLINE": deadline = try seconds(0...600)
        case "ENRICH_IDLE_TIMEOUT": connections.idleTimeout = .milliseconds(Int64(try seconds(0...86_400) * 1000))
        case "ENRICH_HEADER_TIMEOUT": connections.headerTimeout = .milliseconds(Int64(try seconds(0...3_600) * 1000))
        case "ENRICH_BODY_TIMEOUT": connections.bodyTimeout = .milliseconds(Int64(try seconds(0...86_400) * 1000))
        case "ENRICH_MAX_CONNECTIONS":
            guard let count = Int(value), (1...1_000_000).contains(count) else { throw fail("an integer 1-1000000") }
            connections.maxConnections = count
        case "ENRICH_MAP":
            switch value {
            case "google": mapEnabled = true
            case "none": mapEnabled = false
            default: throw fail("google or none")
            }
        case "ENRICH_MAP_STYLE":
            guard let style = StaticMapBuilder.Style(rawValue: value) else { throw fail("current or legacy") }
            mapStyle = style
        case "ENRICH_MAP_URL": mapBaseURL = optional()
        case "ENRICH_MAP_KEY": mapKey = try secret()
        case "ENRICH_MAP_SIGNING_SECRET": mapSigningSecret = try secret()
        case "ENRICH_BODY_TEMPLATE": bodyTemplate = raw
        case "ENRICH_LOCATION_TEMPLATE": locationTemplate = raw
        case "ENRICH_API_KEY": apiKey = try secret()
        case "ENRICH_MAX_BODY":
            guard let bytes = Int(value), bytes >= 1024 else { throw fail("bytes >= 1024") }
            maxBodyBytes = bytes
        case "ENRICH_MAX_IMPORT":
            guard let bytes = Int(value), bytes >= 1024 else { throw fail("bytes >= 1024") }
            maxImportBytes = bytes
        case "ENRICH_LOG_LEVEL":
            guard let level = Logger.Level(rawValue: value) else {
                throw fail("trace, debug, info, notice, warning, error or critical")
            }
            logLevel = level
        default:
            throw ConfigurationError(setting: key, value: value, allowed: "a known ENRICH_* setting")
        }
    }

    /// Settings whose values are secrets: never echoed in errors or logs.
    static let secretKeys: Set<String> = ["ENRICH_WOOSMAP_KEY", "ENRICH_MAP_KEY", "ENRICH_MAP_SIGNING_SECRET", "ENRICH_API_KEY"]

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
        let secrets: [(String, String?)] = [("ENRICH_API_KEY", apiKey), ("ENRICH_WOOSMAP_KEY", woosmapKey),
                                            ("ENRICH_MAP_KEY", mapKey), ("ENRICH_MAP_SIGNING_SECRET", mapSigningSecret)]
        for case let (setting, value?) in secrets where value.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ConfigurationError(setting: setting, value: "<empty>",
                                     allowed: "a non-empty secret; unset the variable to run without it")
        }
        if places == .woosmap, woosmapKey == nil, !Self.isLoopback(woosmapBaseURL) {
            throw ConfigurationError(setting: "ENRICH_WOOSMAP_KEY", value: "", allowed: "a Woosmap private key when ENRICH_PLACES=woosmap")
        }
    }

    static func isLoopback(_ url: String) -> Bool {
        guard let host = URL(string: url)?.host else { return false }
        return host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
    }

    /// A one-line summary for the start-up log, with every secret replaced by whether it is set.
    public var redactedSummary: String {
        "listen=\(host):\(port) db=\(databasePath) durability=\(durability.rawValue) mode=\(mode.rawValue) window=\(stalenessWindow)s "
            + "future_skew=\(maxFutureSkew.map { "\($0)s" } ?? "off") fix_max_age=\(fixMaxAge)s places=\(places.rawValue) "
            + "places_limit=\(placesLimit) timeout=\(upstreamTimeout)s deadline=\(deadline)s map=\(mapEnabled ? mapStyle.rawValue : "none") "
            + "woosmap_key=\(woosmapKey == nil ? "unset" : "set") map_key=\(mapKey == nil ? "unset" : "set") "
            + "map_signing=\(mapSigningSecret == nil ? "off" : "on") auth=\(apiKey == nil ? "off" : "bearer") "
            + "idle_timeout=\(connections.idleTimeout) header_timeout=\(connections.headerTimeout) "
            + "body_timeout=\(connections.bodyTimeout) max_connections=\(connections.maxConnections)"
    }
}

/// A setting with a value that is not allowed.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var setting: String
    public var value: String
    public var allowed: String

    public init(setting: String, value: String, allowed: String) {
        self.setting = setting
        self.value = value
        self.allowed = allowed
    }

    public var description: String {
        value.isEmpty ? "\(setting) is required: expected \(allowed)"
            : "\(setting)='\(value)' is not valid: expected \(allowed)"
    }
}
