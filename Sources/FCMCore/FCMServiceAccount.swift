public import Essentials
public import Foundation
public import _CryptoExtras

/// A Google service account as its JSON key file says it (`project_id`, `client_email`, `private_key`,
/// `private_key_id`, `token_uri`): what an app needs to send through FCM HTTP v1. The private key is a `Secret`,
/// so the account can be logged whole and shows `<redacted>` where the key would be.
public struct FCMServiceAccount: Sendable, Equatable, CustomStringConvertible {
    /// The Firebase project messages are sent for (`/v1/projects/{project_id}/messages:send`).
    public var projectID: String
    /// The account's e-mail address: the JWT's `iss`.
    public var clientEmail: String
    /// The RSA private key (PEM, PKCS#8 as Google writes it).
    public var privateKey: Secret
    /// The key's id (the JWT header's `kid`), when the file has one.
    public var privateKeyID: String?
    /// Where the signed JWT is exchanged for an access token (Google's default when the file has none).
    public var tokenURI: String

    /// Google's OAuth 2.0 token endpoint, for files that do not say.
    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    public init(
        projectID: String, clientEmail: String, privateKey: Secret, privateKeyID: String? = nil,
        tokenURI: String = FCMServiceAccount.defaultTokenURI
    ) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKey = privateKey
        self.privateKeyID = privateKeyID
        self.tokenURI = tokenURI
    }

    /// Reads a service-account key file's JSON. Every problem names the member and says what is expected; the
    /// key's text never appears in one.
    public init(json bytes: some ContiguousBytes) throws(FCMCredentialProblem) {
        let document: JSONValue
        do { document = try JSONParser.parse(bytes, duplicateKeys: .lastWins) } catch {
            throw FCMCredentialProblem("the service-account file is not JSON (\(error))")
        }
        guard case .object(let members) = document else {
            throw FCMCredentialProblem("the service-account file must be a JSON object, as Google's console writes it")
        }
        if let type = members["type"], type.stringValue != "service_account" {
            throw FCMCredentialProblem(
                "type is \(type.stringValue.map { "'\($0)'" } ?? type.typeName); FCM HTTP v1 needs a key of "
                    + "type 'service_account' (Firebase console: Project settings > Service accounts > Generate new "
                    + "private key)")
        }
        func text(_ name: String) throws(FCMCredentialProblem) -> String {
            guard let value = members[name]?.stringValue, !value.allSatisfy(\.isWhitespace) else {
                throw FCMCredentialProblem("\(name) is missing or empty: a service-account key file has it")
            }
            return value
        }
        let account = FCMServiceAccount(
            projectID: try text("project_id"), clientEmail: try text("client_email"),
            privateKey: Secret(try text("private_key")), privateKeyID: members["private_key_id"]?.stringValue,
            tokenURI: members["token_uri"]?.stringValue ?? Self.defaultTokenURI)
        guard OutboundTokenURI.isAcceptable(account.tokenURI) else {
            throw FCMCredentialProblem(
                "token_uri '\(account.tokenURI)' must be an https:// URL (http:// only on a loopback address): the "
                    + "signed assertion and the access token go over it")
        }
        _ = try account.signingKey()
        self = account
    }

    /// The private key, parsed (RSA, 2048 bits or more).
    public func signingKey() throws(FCMCredentialProblem) -> _RSA.Signing.PrivateKey {
        do { return try _RSA.Signing.PrivateKey(pemRepresentation: privateKey.exposed) } catch {
            throw FCMCredentialProblem(
                "private_key is not an RSA private key of 2048 bits or more in PEM (BEGIN PRIVATE KEY)")
        }
    }

    /// The account as a key file says it (for the mock and tests that make throwaway accounts).
    public var json: [UInt8] {
        var object = JSONObjectWriter()
        object.field("type", "service_account")
        object.field("project_id", projectID)
        object.field("private_key_id", privateKeyID)
        object.field("private_key", privateKey.exposed)
        object.field("client_email", clientEmail)
        object.field("token_uri", tokenURI)
        return object.finished()
    }

    public var description: String {
        "FCMServiceAccount(project: \(projectID), client: \(clientEmail), key: \(Secret.redacted), "
            + "token_uri: \(tokenURI))"
    }
}

/// A service-account file or credential that cannot be used, said as a sentence.
public struct FCMCredentialProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The token endpoint must be an https URL (plain http only to this machine): an assertion and an access token
/// travel over it.
enum OutboundTokenURI {
    static func isAcceptable(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased()
        else { return false }
        if scheme == "https" { return true }
        return scheme == "http" && (host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]")
    }
}
