import Crypto
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import HTTPTypes
import Hummingbird

/// What a request may reach: one app's data (the key's app, or the app an admin key names in `Enrich-App`) and
/// what it may do there. Set by `AuthMiddleware` for the request's task; every route reads it.
struct AppScope: Sendable {
    /// The header an admin key (or a service without keys) names an app with; absent: `default`.
    static let header = "Enrich-App"
    /// The same, as a field name made once (it is read on every request).
    static let headerName = HTTPField.Name(header)!

    enum Permission: Sendable {
        /// Reading the app's data (GET).
        case read
        /// What both read-only and send-only keys may do: a push's results (`GET /v1/push/{id}`) and
        /// `POST /v1/enrich`, which changes nothing.
        case readOrSend
        /// Sending pushes (push, Live Activity events, broadcasts).
        case send
        /// Changing the app's data (devices, tokens, regions, channels).
        case write
        /// What belongs to no app (POIs and their imports): admin keys only.
        case admin
        /// Confirming that a notification was shown (`POST /v1/receipts`): receipt keys, and keys that may send.
        case receipt
    }

    var app: String
    var access: APIKeyDefinition.Access
    /// The key's name for logs and messages (nil without keys).
    var keyName: String?

    @TaskLocal static var current = AppScope(app: AppNamespace.defaultApp, access: .admin, keyName: nil)

    /// True when this scope may do `permission`.
    func allows(_ permission: Permission) -> Bool {
        switch access {
        case .admin: true
        case .all: permission != .admin
        case .read: permission == .read || permission == .readOrSend
        case .send: permission == .send || permission == .readOrSend || permission == .receipt
        case .receipt: permission == .receipt
        }
    }

    /// The stored key of a device (or region) id of this app.
    func key(_ id: String) -> String { AppNamespace.key(app: app, id: id) }

    /// Refuses (422 `topic_not_of_app`) a topic (a bundle id, with a push type's suffix or without) that is not this
    /// app's: an app sends only to its own bundle id, and the `default` app only to bundle ids no app declares, so
    /// one app's key never sends with another app's credential.
    func requireOwnTopic(_ topic: String, field: String, apps: AppsConfiguration?) throws {
        let owner = apps?.app(forTopic: topic)
        if app == AppNamespace.defaultApp {
            guard owner != nil else { return }
            throw APIError(
                .unprocessableContent, reason: .topicNotOfApp,
                message: "\(field) '\(topic)' is the bundle id of an app of the apps file, not of the default app: "
                    + "send to it through its app (its key, or the \(Self.header) header)",
                details: ["field": .string(field)])
        }
        guard owner?.id != app else { return }
        let bundle = apps?.app(id: app)?.bundleID ?? "?"
        throw APIError(
            .unprocessableContent, reason: .topicNotOfApp,
            message: "\(field) '\(topic)' is not app '\(app)''s bundle id '\(bundle)'",
            details: ["field": .string(field)])
    }

    /// A 403 that says what the key may do.
    func forbidden(_ permission: Permission) -> APIError {
        let name = keyName.map { "key '\($0)'" } ?? "this key"
        let may: String =
            switch access {
            case .admin: "do everything"
            case .all: "do everything within app '\(app)' but change POIs (an admin key's work)"
            case .read: "only read app '\(app)' (GET routes and POST /v1/enrich)"
            case .send: "only send app '\(app)''s pushes and read their results"
            case .receipt: "only confirm app '\(app)''s notifications (POST /v1/receipts)"
            }
        let wanted: String =
            switch permission {
            case .read, .readOrSend: "read"
            case .send: "send"
            case .write: "change data"
            case .admin: "change what belongs to no app (POIs)"
            case .receipt: "confirm notifications"
            }
        return APIError(
            .forbidden, reason: .forbidden, message: "\(name) may \(may); this route needs a key that may \(wanted)")
    }
}

/// The keys the service accepts: `ENRICH_API_KEY` (an admin key) and the apps file's, compared by SHA-256 digest
/// in constant time (every key is compared, whichever matches).
struct APIKeyRing: Sendable {
    let keys: [APIKeyDefinition]
    /// The apps a request can name: `default` and the apps file's.
    let apps: Set<String>

    init(configuration: ServiceConfiguration) {
        var keys = configuration.delivery.apps?.keys ?? []
        if let key = configuration.apiKey {
            keys.insert(
                APIKeyDefinition(
                    name: "ENRICH_API_KEY", digest: Array(SHA256.hash(data: Data(key.exposed.utf8))), access: .admin,
                    app: nil), at: 0)
        }
        self.keys = keys
        apps = Set([AppNamespace.defaultApp] + (configuration.delivery.apps?.apps.map(\.id) ?? []))
    }

    var isEmpty: Bool { keys.isEmpty }

    /// Refuses an `ENRICH_API_KEY` that is also a key of the apps file: which scope it has would be a guess.
    static func check(_ configuration: ServiceConfiguration) throws(ConfigurationError) {
        guard let key = configuration.apiKey else { return }
        let digest = Array(SHA256.hash(data: Data(key.exposed.utf8)))
        if let twin = configuration.delivery.apps?.keys.first(where: { $0.digest == digest }) {
            throw ConfigurationError(
                setting: "ENRICH_API_KEY", value: "(not shown)",
                allowed: "a key of its own",
                problem:
                    "ENRICH_API_KEY (an admin key) is also key '\(twin.name)' of the apps file: give each its own key")
        }
    }

    /// What signs the preview pages' session cookies: derived from the admin keys' digests (a changed admin key
    /// signs every browser out); nil without an admin key.
    var previewSecret: Secret? {
        let admins = keys.filter { $0.access == .admin }
        guard !admins.isEmpty else { return nil }
        return Secret(admins.map { Base64URL.encode(Data($0.digest), padded: false) }.joined(separator: "."))
    }

    /// True when `presented` is an admin key.
    func isAdmin(_ presented: String) -> Bool { match(presented)?.access == .admin }

    /// The key whose digest is the presented key's, compared in constant time over all keys.
    func match(_ presented: String) -> APIKeyDefinition? {
        let digest = Array(SHA256.hash(data: Data(presented.utf8)))
        var found: APIKeyDefinition?
        for key in keys {
            var difference: UInt8 = 0
            for (a, b) in zip(key.digest, digest) { difference |= a ^ b }
            if difference == 0, key.digest.count == digest.count { found = key }
        }
        return found
    }

    /// The key of `Authorization: Bearer <key>` (the scheme in any case), nil without one.
    static func bearer(_ headers: HTTPFields) -> String? {
        guard let header = headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return String(parts[1])
    }

    /// The scope of a request to a route that takes a key from `Authorization` only (every `/v1` route), as
    /// `AuthMiddleware` gives it; nil when the request has none or one that is refused (the middleware says why).
    func scope(of headers: HTTPFields) -> AppScope? {
        let requested = headers[AppScope.headerName]
        if keys.isEmpty { return try? scope(key: nil, requested: requested) }
        guard let presented = Self.bearer(headers), let key = match(presented) else { return nil }
        return try? scope(key: key, requested: requested)
    }

    /// The scope of a request made with `key` (nil: no keys configured) naming `requested` in `Enrich-App`.
    func scope(key: APIKeyDefinition?, requested: String?) throws -> AppScope {
        let access = key?.access ?? .admin
        let app: String
        if let own = key?.app {
            // An app's key reaches its own app only: naming another is answered as naming none that exists.
            if let requested, requested != own { throw Self.unknownApp(requested) }
            app = own
        } else {
            app = requested ?? AppNamespace.defaultApp
            guard apps.contains(app) else { throw Self.unknownApp(app) }
        }
        return AppScope(app: app, access: access, keyName: key?.name)
    }

    static func unknownApp(_ app: String) -> APIError {
        APIError(
            .notFound, reason: .appNotFound,
            message:
                "no app '\(app)' is reachable with this key (the \(AppScope.header) header names an app of the apps file, or default)"
        )
    }
}
