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
        /// A Google service-account key file (JSON): FCM HTTP v1 for the app's Android devices.
        case firebase(serviceAccountFile: String)
    }

    /// True for a service account (FCM), false for an APNs credential.
    public var isFirebase: Bool {
        if case .firebase = method { return true }
        return false
    }

    public var name: String
    public var method: Method

    /// True for a `.p8` key, which Live Activity pushes need.
    public var usesToken: Bool {
        if case .token = method { return true }
        return false
    }
}

/// One app the service sends for: its id, its bundle id, the credentials it sends with, and its own enrichment
/// settings when it has some. An app has an APNs credential, a service account (FCM), or both.
public struct AppDefinition: Sendable, Equatable {
    public var id: String
    public var bundleID: String
    /// The APNs credential its iOS devices' pushes go out with; nil for an Android-only app.
    public var credential: String?
    /// The service account its Android devices' FCM messages go out with (a credential of the file), if any.
    public var fcmCredential: String? = nil
    public var enrichment: AppEnrichment? = nil
    /// The zone of a device without one, for a push that says `"missing_time_zone": "app_default"`.
    public var timeZone: String? = nil
    /// The frequency cap of every push of the app that does not give its own.
    public var frequencyCap: FrequencyCap? = nil
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
                "service_account_file",
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
            } else if let account = try string("service_account_file") {
                method = .firebase(serviceAccountFile: resolve(account))
            } else {
                throw fail(
                    "credential '\(name)' has no method: give key_file, key_id and team_id (a .p8 key), "
                        + "cert_file and cert_key_file, p12_file, or service_account_file (FCM)")
            }
            credentials[name] = AppCredential(name: name, method: method)
        }
        let appItems: [JSONValue]
        switch root["apps"] {
        case nil: appItems = []
        case .array(let items)?: appItems = items
        default:
            throw fail(
                "\"apps\" must be an array of {\"id\", \"bundle_id\", \"credential\" and/or \"fcm_credential\"}")
        }
        if appItems.isEmpty, root["keys"] == nil {
            throw fail("the file declares nothing: give \"apps\" (with their \"credentials\") or \"keys\"")
        }
        var apps: [AppDefinition] = []
        for (index, item) in appItems.enumerated() {
            guard case .object(let members) = item else { throw fail("apps[\(index)] must be an object") }
            let allowedMembers = [
                "id", "bundle_id", "credential", "fcm_credential", "enrichment", "time_zone", "frequency_cap",
            ]
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
            var credential: String?
            if let value = members["credential"] {
                guard let name = value.stringValue else {
                    throw fail(
                        "app '\(id)': credential must be a string, the name of a declared APNs credential (declared: "
                            + "\(credentials.values.filter { !$0.isFirebase }.map(\.name).sorted().joined(separator: ", ")))"
                    )
                }
                guard let declared = credentials[name] else {
                    throw fail(
                        "app '\(id)' names credential '\(name)', which is not declared (declared APNs credentials: "
                            + "\(credentials.values.filter { !$0.isFirebase }.map(\.name).sorted().joined(separator: ", ")))"
                    )
                }
                guard !declared.isFirebase else {
                    throw fail(
                        "app '\(id)': credential '\(name)' is a service account (FCM); name it as fcm_credential, "
                            + "and an APNs credential (.p8 key or certificate) as credential")
                }
                credential = name
            }
            var fcmCredential: String?
            if let value = members["fcm_credential"] {
                guard let name = value.stringValue, let named = credentials[name], named.isFirebase else {
                    throw fail(
                        "app '\(id)': fcm_credential must name a declared credential with service_account_file (declared: "
                            + "\(credentials.values.filter(\.isFirebase).map(\.name).sorted().joined(separator: ", ")))"
                    )
                }
                fcmCredential = name
            }
            guard credential != nil || fcmCredential != nil else {
                throw fail(
                    "app '\(id)': credential (APNs, for its iOS devices) or fcm_credential (a service account, for its "
                        + "Android devices) is required, or both (declared: "
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
                    id: id, bundleID: bundle, credential: credential, fcmCredential: fcmCredential,
                    enrichment: enrichment, timeZone: timeZone, frequencyCap: frequencyCap))
        }
        let keys = try loadKeys(root["keys"], apps: apps, fail: fail)
        return AppsConfiguration(credentials: credentials, apps: apps, keys: keys, path: path)
    }

}

extension DeliverySettings {
    /// The credential and environment that send to `topic`: its app's, else the default credential when the
    /// `ENRICH_APNS_*` settings are set; nil when neither.
    public func senderKey(topic: String, environment: APNsEnvironmentName) -> SenderKey? {
        if environment == .fcm {
            if let app = apps?.app(forTopic: topic) {
                return app.fcmCredential.map { SenderKey(credential: $0, environment: .fcm) }
            }
            return fcmServiceAccountFile == nil
                ? nil : SenderKey(credential: SenderKey.defaultCredential, environment: .fcm)
        }
        if let app = apps?.app(forTopic: topic) {
            return app.credential.map { SenderKey(credential: $0, environment: environment) }
        }
        return hasDefaultCredential ? SenderKey(credential: SenderKey.defaultCredential, environment: environment) : nil
    }

    /// Why a delivery to `topic` has no credential.
    public func noCredentialMessage(topic: String, environment: APNsEnvironmentName = .production) -> String {
        if environment == .fcm {
            if let app = apps?.app(forTopic: topic) {
                return "app '\(app.id)' has no fcm_credential in ENRICH_APPS_FILE: declare its service account to "
                    + "send to its Android devices"
            }
            return "no app in ENRICH_APPS_FILE has the bundle id of topic '\(topic)', and no default service account "
                + "(ENRICH_FCM_SERVICE_ACCOUNT_FILE) is set: declare the app's fcm_credential"
        }
        if let app = apps?.app(forTopic: topic) {
            return "app '\(app.id)' has no APNs credential in ENRICH_APPS_FILE (it sends to Android only): declare its "
                + "credential (a .p8 key or a certificate) to send to its iOS devices"
        }
        return "no app in ENRICH_APPS_FILE has the bundle id of topic '\(topic)', and no default credentials "
            + "(ENRICH_APNS_KEY_FILE or a certificate) are set: declare the app"
    }

    /// True when pushes to `topic` go out with a `.p8` key (Live Activities need one).
    public func usesTokenAuthentication(topic: String) -> Bool {
        if let app = apps?.app(forTopic: topic) {
            return app.credential.flatMap { apps?.credentials[$0]?.usesToken } ?? false
        }
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
