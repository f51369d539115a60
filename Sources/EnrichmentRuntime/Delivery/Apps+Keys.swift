import EnrichmentCore
import Essentials
import Foundation

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

extension AppsConfiguration {
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
