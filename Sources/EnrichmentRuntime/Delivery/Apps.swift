public import APNsCore
public import Delivery
public import EnrichmentCore
public import Essentials
import Foundation

/// Which connections send a delivery: one credential (a team's `.p8` key, or an app's certificate) in one APNs
/// environment. APNs takes one team per connection, so connections are pooled per credential and environment,
/// never per app.
public struct SenderKey: Hashable, Sendable, CustomStringConvertible {
    /// The credential's name in the apps file; `default` for the `ENRICH_APNS_*` settings.
    public var credential: String
    public var environment: APNsEnvironmentName

    public init(credential: String, environment: APNsEnvironmentName) {
        self.credential = credential
        self.environment = environment
    }

    /// The name of the single-app settings' credential (`ENRICH_APNS_KEY_FILE` or a certificate).
    public static let defaultCredential = "default"

    /// `sandbox` / `production` for the default credential (as before apps existed), else
    /// `<credential>/<environment>`: the label of metrics and logs.
    public var description: String {
        credential == Self.defaultCredential ? environment.rawValue : "\(credential)/\(environment.rawValue)"
    }
}

/// One set of APNs credentials declared in the apps file.
public struct AppCredential: Sendable, Equatable {
    public enum Method: Sendable, Equatable {
        /// A `.p8` key: one key serves every app of its team, in both environments.
        case token(keyFile: String, keyID: String, teamID: String)
        /// A PEM certificate and its key: one app.
        case certificate(certificateFile: String, keyFile: String)
        /// A PKCS#12 file; its password is read from the named environment variable (the file holds no secret).
        case pkcs12(file: String, passwordVariable: String?)
    }

    public var name: String
    public var method: Method

    /// True for a `.p8` key, which Live Activity pushes need.
    public var usesToken: Bool {
        if case .token = method { return true }
        return false
    }
}

/// One app the service sends for: its id, its bundle id, the credential it sends with, and its own enrichment
/// settings when it has some.
public struct AppDefinition: Sendable, Equatable {
    public var id: String
    public var bundleID: String
    public var credential: String
    public var enrichment: AppEnrichment? = nil
    /// The zone of a device without one, for a push that says `"missing_time_zone": "app_default"`.
    public var timeZone: String? = nil
    /// The frequency cap of every push of the app that does not give its own.
    public var frequencyCap: FrequencyCap? = nil
}

/// An app's own enrichment settings (the apps file's `"enrichment"`): what it leaves out is the service's
/// (`ENRICH_BODY_TEMPLATE`, `ENRICH_PLACES_*`, `ENRICH_MAP_STYLE`).
public struct AppEnrichment: Sendable, Equatable {
    public var bodyTemplate: String?
    public var locationTemplate: String?
    public var placesLimit: Int?
    public var placesRadius: Double?
    public var placesTypes: [String]?
    public var placesTags: [String]?
    public var placesQuery: String?
    public var mapStyle: StaticMapBuilder.Style?

    static let members = [
        "body_template", "location_template", "places_limit", "places_radius", "places_types", "places_tags",
        "places_query", "map_style",
    ]

    /// Reads and checks `"enrichment"` of app `app` (templates compiled, the query parsed).
    static func load(_ value: JSONValue, app: String, fail: (String) -> ConfigurationError)
        throws(ConfigurationError) -> AppEnrichment
    {
        guard case .object(let members) = value else {
            throw fail("app '\(app)': enrichment must be an object (\(members.joined(separator: ", ")))")
        }
        if let unknown = members.keys.sorted().first(where: { !Self.members.contains($0) }) {
            throw fail(
                "app '\(app)': enrichment member '\(unknown)' is unknown (allowed: \(Self.members.joined(separator: ", ")))"
            )
        }
        func string(_ key: String) throws(ConfigurationError) -> String? {
            guard let member = members[key] else { return nil }
            guard let text = member.stringValue, !text.isEmpty else {
                throw fail("app '\(app)': enrichment \(key) must be a non-empty string")
            }
            return text
        }
        func strings(_ key: String) throws(ConfigurationError) -> [String]? {
            guard let member = members[key] else { return nil }
            guard case .array(let items) = member, let texts = Optional(items.compactMap(\.stringValue)),
                texts.count == items.count, texts.allSatisfy({ !$0.isEmpty })
            else { throw fail("app '\(app)': enrichment \(key) must be an array of non-empty strings") }
            return texts
        }
        var settings = AppEnrichment()
        settings.bodyTemplate = try string("body_template")
        settings.locationTemplate = try string("location_template")
        do {
            _ = try BodyTemplate(
                poi: settings.bodyTemplate ?? BodyTemplate.defaultPOITemplate,
                location: settings.locationTemplate ?? BodyTemplate.defaultLocationTemplate)
        } catch {
            throw fail("app '\(app)': enrichment template: \(error)")
        }
        if let member = members["places_limit"] {
            guard case .int(let limit) = member, (1...300).contains(limit) else {
                throw fail("app '\(app)': enrichment places_limit must be an integer 1-300")
            }
            settings.placesLimit = Int(limit)
        }
        if let member = members["places_radius"] {
            guard let radius = member.lenientDouble, member.stringValue == nil, radius > 0, radius.isFinite else {
                throw fail("app '\(app)': enrichment places_radius must be metres > 0")
            }
            settings.placesRadius = radius
        }
        settings.placesTypes = try strings("places_types")
        settings.placesTags = try strings("places_tags")
        settings.placesQuery = try string("places_query")
        if let query = settings.placesQuery {
            do { _ = try PlaceFilter.parse(query) } catch {
                throw fail("app '\(app)': enrichment places_query: \(error)")
            }
        }
        if let style = try string("map_style") {
            guard let known = StaticMapBuilder.Style(rawValue: style) else {
                throw fail("app '\(app)': enrichment map_style must be current or legacy")
            }
            settings.mapStyle = known
        }
        return settings
    }
}

/// An API key declared in the apps file: its name, the SHA-256 of the key (the key itself is never in the file),
/// what it may do and, unless it is an admin key, the one app it may do it in.
public struct APIKeyDefinition: Sendable, Equatable, CustomStringConvertible {
    public enum Access: String, Sendable, CaseIterable {
        /// Everything, in every app (and what belongs to no app: POIs, imports).
        case admin
        /// Everything of one app: its devices, fixes, tokens, activities, channels, regions and pushes.
        case all
        /// Reading one app's data (GET), and `POST /v1/enrich`, which changes nothing.
        case read
        /// Sending one app's pushes (push, Live Activity events, broadcasts), reading their results, enriching.
        case send
        /// Only confirming that a notification of the app's was shown (`POST /v1/receipts`): the key an app's
        /// notification service extension holds.
        case receipt
    }

    public var name: String
    /// SHA-256 of the key's UTF-8 bytes.
    public var digest: [UInt8]
    public var access: Access
    /// The app (nil for an admin key).
    public var app: String?

    public init(name: String, digest: [UInt8], access: Access, app: String?) {
        self.name = name
        self.digest = digest
        self.access = access
        self.app = app
    }

    /// Never the digest: it is as good as a password against a guessable key.
    public var description: String { "APIKey(\(name), \(access.rawValue)\(app.map { " in \($0)" } ?? ""))" }
}

/// The apps file (`ENRICH_APPS_FILE`): credentials by name, apps naming the one they use, and API keys.
///
/// ```json
/// {"credentials": {"acme": {"key_file": "AuthKey_ABC1234567.p8", "key_id": "ABC1234567", "team_id": "TEAM123456"},
///                  "courier-cert": {"p12_file": "courier.p12", "p12_password_env": "COURIER_P12_PASSWORD"}},
///  "apps": [{"id": "consumer", "bundle_id": "com.example.consumer", "credential": "acme"},
///           {"id": "courier", "bundle_id": "com.example.courier", "credential": "courier-cert"}]}
/// ```
///
/// Paths are relative to the file. A push goes out with the credential of the app whose bundle id is its topic;
/// a topic no app declares uses the `ENRICH_APNS_*` credentials (the `default` app) when they are set.
public struct AppsConfiguration: Sendable, Equatable {
    public var credentials: [String: AppCredential]
    public var apps: [AppDefinition]
    /// API keys with their scopes (admin, or one app's all / read / send).
    public var keys: [APIKeyDefinition] = []
    /// Where it was read from, for messages.
    public var path: String

    /// The app whose bundle id is `topic`, with a push type's suffix or without.
    public func app(forTopic topic: String) -> AppDefinition? {
        var bundle = topic
        for type in PushType.allCases where !type.topicSuffix.isEmpty && bundle.hasSuffix(type.topicSuffix) {
            bundle = String(bundle.dropLast(type.topicSuffix.count))
            break
        }
        return apps.first { $0.bundleID == bundle }
    }

    /// The app with this id.
    public func app(id: String) -> AppDefinition? { apps.first { $0.id == id } }

    static func isValidName(_ text: String) -> Bool { AppNamespace.isValidName(text) }

    /// Reads and checks the file; every problem names the file, the app or credential, and what is allowed.
    public static func load(path: String) throws(ConfigurationError) -> AppsConfiguration {
        func fail(_ problem: String) -> ConfigurationError {
            ConfigurationError(
                setting: "ENRICH_APPS_FILE", value: path, allowed: "a readable apps file", problem: problem)
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw fail("cannot read '\(path)'") }
        let document: JSONValue
        do { document = try JSONParser.parse(data) } catch { throw fail("'\(path)' is not JSON: \(error)") }
        guard case .object(let root) = document else { throw fail("the file must hold a JSON object") }
        if let unknown = root.keys.sorted().first(where: { !["credentials", "apps", "keys"].contains($0) }) {
            throw fail("'\(unknown)' is not a member of the apps file (allowed: credentials, apps, keys)")
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        func resolve(_ file: String) -> String {
            file.hasPrefix("/") ? file : directory.appendingPathComponent(file).path
        }
        let credentialMembers: [String: JSONValue]
        switch root["credentials"] {
        case nil: credentialMembers = [:]
        case .object(let members)?: credentialMembers = members
        default: throw fail("\"credentials\" must be an object of named credentials (a .p8 key or a certificate)")
        }
        var credentials: [String: AppCredential] = [:]
        for (name, value) in credentialMembers.sorted(by: { $0.key < $1.key }) {
            guard isValidName(name) else {
                throw fail("credential '\(name)': names are 1 to 64 lower-case letters, digits and '-'")
            }
            guard name != SenderKey.defaultCredential else {
                throw fail("credential 'default' is the ENRICH_APNS_* settings' credential: give this one another name")
            }
            guard case .object(let members) = value else { throw fail("credential '\(name)' must be an object") }
            func string(_ key: String) throws(ConfigurationError) -> String? {
                guard let member = members[key] else { return nil }
                guard let text = member.stringValue, !text.isEmpty else {
                    throw fail("credential '\(name)': \(key) must be a non-empty string")
                }
                return text
            }
            let allowed = [
                "key_file", "key_id", "team_id", "cert_file", "cert_key_file", "p12_file", "p12_password_env",
            ]
            if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw fail(
                    "credential '\(name)': '\(unknown)' is unknown (allowed: \(allowed.joined(separator: ", ")))")
            }
            let method: AppCredential.Method
            if let keyFile = try string("key_file") {
                guard let keyID = try string("key_id"), let teamID = try string("team_id") else {
                    throw fail("credential '\(name)': a .p8 key needs key_file, key_id and team_id")
                }
                method = .token(keyFile: resolve(keyFile), keyID: keyID, teamID: teamID)
            } else if let p12 = try string("p12_file") {
                method = .pkcs12(file: resolve(p12), passwordVariable: try string("p12_password_env"))
            } else if let certificate = try string("cert_file") {
                guard let key = try string("cert_key_file") else {
                    throw fail("credential '\(name)': cert_file needs cert_key_file (its PEM private key)")
                }
                method = .certificate(certificateFile: resolve(certificate), keyFile: resolve(key))
            } else {
                throw fail(
                    "credential '\(name)' has no method: give key_file, key_id and team_id (a .p8 key), "
                        + "cert_file and cert_key_file, or p12_file")
            }
            credentials[name] = AppCredential(name: name, method: method)
        }
        let appItems: [JSONValue]
        switch root["apps"] {
        case nil: appItems = []
        case .array(let items)?: appItems = items
        default: throw fail("\"apps\" must be an array of {\"id\", \"bundle_id\", \"credential\"}")
        }
        if appItems.isEmpty, root["keys"] == nil {
            throw fail("the file declares nothing: give \"apps\" (with their \"credentials\") or \"keys\"")
        }
        var apps: [AppDefinition] = []
        for (index, item) in appItems.enumerated() {
            guard case .object(let members) = item else { throw fail("apps[\(index)] must be an object") }
            let allowedMembers = ["id", "bundle_id", "credential", "enrichment", "time_zone", "frequency_cap"]
            if let unknown = members.keys.sorted().first(where: { !allowedMembers.contains($0) }) {
                throw fail(
                    "apps[\(index)]: '\(unknown)' is unknown (allowed: \(allowedMembers.joined(separator: ", ")))")
            }
            guard let id = members["id"]?.stringValue, isValidName(id) else {
                throw fail("apps[\(index)]: id is required, 1 to 64 lower-case letters, digits and '-'")
            }
            guard id != "default" else {
                throw fail("app 'default' is the ENRICH_APNS_* settings' app: give this app another id")
            }
            guard let bundle = members["bundle_id"]?.stringValue, APNsValidator.topicProblem(bundle) == nil else {
                throw fail("app '\(id)': bundle_id is required (the app's bundle id)")
            }
            guard let credential = members["credential"]?.stringValue else {
                throw fail(
                    "app '\(id)': credential is required (one of \(credentials.keys.sorted().joined(separator: ", ")))")
            }
            guard credentials[credential] != nil else {
                throw fail(
                    "app '\(id)' names credential '\(credential)', which is not declared (declared: "
                        + "\(credentials.keys.sorted().joined(separator: ", ")))")
            }
            if let twin = apps.first(where: { $0.id == id }) { throw fail("app id '\(twin.id)' is declared twice") }
            if let twin = apps.first(where: { $0.bundleID == bundle }) {
                throw fail("apps '\(twin.id)' and '\(id)' have the same bundle_id '\(bundle)'")
            }
            let enrichment = try members["enrichment"].map { value throws(ConfigurationError) in
                try AppEnrichment.load(value, app: id, fail: fail)
            }
            var timeZone: String?
            if let value = members["time_zone"] {
                guard let name = value.stringValue, ZoneClock.zone(named: name) != nil else {
                    throw fail("app '\(id)': time_zone must be an IANA zone name such as \"Europe/Paris\"")
                }
                timeZone = name
            }
            var frequencyCap: FrequencyCap?
            if let value = members["frequency_cap"] {
                guard case .object(let cap) = value, Set(cap.keys) == ["max", "window_s"],
                    case .int(let max)? = cap["max"], (1...1_000).contains(max),
                    let window = cap["window_s"]?.lenientDouble, (60...31_536_000).contains(window)
                else {
                    throw fail(
                        "app '\(id)': frequency_cap must be {\"max\": 1 to 1000, \"window_s\": 60 to 31536000}")
                }
                frequencyCap = FrequencyCap(max: Int(max), window: window)
            }
            apps.append(
                AppDefinition(
                    id: id, bundleID: bundle, credential: credential, enrichment: enrichment, timeZone: timeZone,
                    frequencyCap: frequencyCap))
        }
        let keys = try loadKeys(root["keys"], apps: apps, fail: fail)
        return AppsConfiguration(credentials: credentials, apps: apps, keys: keys, path: path)
    }

    /// `"keys": [{"name", "sha256", "access": "admin"|"all"|"read"|"send", "app"}]`.
    static func loadKeys(
        _ value: JSONValue?, apps: [AppDefinition], fail: (String) -> ConfigurationError
    ) throws(ConfigurationError) -> [APIKeyDefinition] {
        guard let value else { return [] }
        guard case .array(let items) = value else {
            throw fail("\"keys\" must be an array of {\"name\", \"sha256\", \"access\", \"app\"}")
        }
        let appIDs = [AppNamespace.defaultApp] + apps.map(\.id)
        let accesses = APIKeyDefinition.Access.allCases.map(\.rawValue).joined(separator: ", ")
        var keys: [APIKeyDefinition] = []
        for (index, item) in items.enumerated() {
            guard case .object(let members) = item else { throw fail("keys[\(index)] must be an object") }
            let allowed = ["name", "sha256", "access", "app"]
            if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw fail("keys[\(index)]: '\(unknown)' is unknown (allowed: name, sha256, access, app)")
            }
            guard let name = members["name"]?.stringValue, isValidName(name) else {
                throw fail("keys[\(index)]: name is required, 1 to 64 lower-case letters, digits and '-'")
            }
            if members["key"] != nil || members["secret"] != nil {
                throw fail("key '\(name)': the file holds the key's SHA-256 (sha256), never the key")
            }
            guard let hex = members["sha256"]?.stringValue, let digest = hexBytes(hex), digest.count == 32 else {
                throw fail(
                    "key '\(name)': sha256 is required, the 64 hex digits of the key's SHA-256 "
                        + "(printf %s \"$KEY\" | sha256sum, or enrichment-server new-api-key)")
            }
            guard let raw = members["access"]?.stringValue, let access = APIKeyDefinition.Access(rawValue: raw) else {
                throw fail("key '\(name)': access is required, one of \(accesses)")
            }
            let app = members["app"]?.stringValue
            if access == .admin, app != nil {
                throw fail("key '\(name)': an admin key reaches every app; remove \"app\" or choose all, read or send")
            }
            if access != .admin {
                guard let app else {
                    throw fail(
                        "key '\(name)': a key with access \(raw) names its app (one of \(appIDs.joined(separator: ", ")))"
                    )
                }
                guard appIDs.contains(app) else {
                    throw fail(
                        "key '\(name)' names app '\(app)', which is not declared (declared: \(appIDs.joined(separator: ", ")))"
                    )
                }
            }
            if keys.contains(where: { $0.name == name }) { throw fail("key name '\(name)' is declared twice") }
            if let twin = keys.first(where: { $0.digest == digest }) {
                throw fail("keys '\(twin.name)' and '\(name)' have the same sha256: give each its own key")
            }
            keys.append(APIKeyDefinition(name: name, digest: digest, access: access, app: app))
        }
        return keys
    }

    /// The bytes of a hex string (either case), or nil.
    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 0x30...0x39: byte - 0x30
            case 0x61...0x66: byte - 0x61 + 10
            case 0x41...0x46: byte - 0x41 + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

extension DeliverySettings {
    /// The credential and environment that send to `topic`: its app's, else the default credential when the
    /// `ENRICH_APNS_*` settings are set; nil when neither.
    public func senderKey(topic: String, environment: APNsEnvironmentName) -> SenderKey? {
        if let app = apps?.app(forTopic: topic) {
            return SenderKey(credential: app.credential, environment: environment)
        }
        return hasDefaultCredential ? SenderKey(credential: SenderKey.defaultCredential, environment: environment) : nil
    }

    /// Why a delivery to `topic` has no credential.
    public func noCredentialMessage(topic: String) -> String {
        "no app in ENRICH_APPS_FILE has the bundle id of topic '\(topic)', and no default credentials "
            + "(ENRICH_APNS_KEY_FILE or a certificate) are set: declare the app"
    }

    /// True when pushes to `topic` go out with a `.p8` key (Live Activities need one).
    public func usesTokenAuthentication(topic: String) -> Bool {
        if let app = apps?.app(forTopic: topic) { return apps?.credentials[app.credential]?.usesToken ?? false }
        return usesTokenAuthentication
    }

    /// True when the `ENRICH_APNS_*` settings hold credentials (the `default` app's).
    public var hasDefaultCredential: Bool { keyFile != nil || certificateFile != nil || p12File != nil }

    /// Reads `appsFile` into `apps` (start-up; a problem names the file, the app or the credential).
    public mutating func loadApps() throws(ConfigurationError) {
        guard let appsFile else { return }
        apps = try AppsConfiguration.load(path: appsFile)
    }
}
