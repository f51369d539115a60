import Crypto
import Essentials
import Foundation
public import _CryptoExtras

/// The JWT a service account signs to get an access token (RFC 7523's JWT-bearer grant, as Google documents it for
/// service accounts): RS256, `kid` = the key's id, claims `iss` (the account's e-mail), `scope`, `aud` (the token
/// endpoint), `iat` and `exp` in whole seconds, at most an hour apart.
public enum FCMAssertion {
    /// The scope FCM HTTP v1 needs.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The grant type posted with the assertion.
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Google refuses assertions that live longer than this.
    public static let maximumLifetime: Int64 = 3600

    /// Signs an assertion for `account`, issued at `issuedAt` (epoch seconds), valid for `lifetime` seconds.
    public static func sign(
        _ account: FCMServiceAccount, issuedAt: Int64, lifetime: Int64 = maximumLifetime,
        scope: String = messagingScope
    ) throws(FCMCredentialProblem) -> String {
        var header = JSONObjectWriter(capacity: 96)
        header.field("alg", "RS256")
        header.field("typ", "JWT")
        header.field("kid", account.privateKeyID)
        var claims = JSONObjectWriter(capacity: 256)
        claims.field("iss", account.clientEmail)
        claims.field("scope", scope)
        claims.field("aud", account.tokenURI)
        claims.field("iat", issuedAt)
        claims.field("exp", issuedAt + lifetime)
        let input =
            Base64URL.encode(header.finished(), padded: false) + "."
            + Base64URL.encode(claims.finished(), padded: false)
        let key = try account.signingKey()
        do {
            let signature = try key.signature(for: SHA256.hash(data: Data(input.utf8)), padding: .insecurePKCS1v1_5)
            return input + "." + Base64URL.encode(signature.rawRepresentation, padded: false)
        } catch {
            throw FCMCredentialProblem("the service account's key could not sign (\(error))")
        }
    }

    /// What a verified assertion says.
    public struct Claims: Sendable, Equatable {
        public var issuer: String
        public var scope: String
        public var audience: String
        public var issuedAt: Int64
        public var expiresAt: Int64
        public var keyID: String?
    }

    /// Why Google's token endpoint refuses an assertion, in its OAuth error vocabulary.
    public struct Refusal: Error, Sendable, Equatable {
        /// `invalid_grant`, `invalid_request`, `unauthorized_client` or `invalid_scope`.
        public var error: String
        public var description: String
    }

    /// Checks an assertion as Google's token endpoint does: three base64url parts, RS256, a signature that verifies
    /// with `publicKey`, `iss`, `aud` equal to `audience`, a scope, and `iat`/`exp` in whole seconds with `exp`
    /// after `now`, `iat` not in the future, and at most an hour between them.
    public static func verify(
        _ assertion: String, publicKey: _RSA.Signing.PublicKey, audience: String, now: Int64
    ) throws(Refusal) -> Claims {
        func refuse(_ text: String) -> Refusal { Refusal(error: "invalid_grant", description: text) }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(String(parts[0])),
            let claimsData = Base64URL.decode(String(parts[1])), let signature = Base64URL.decode(String(parts[2])),
            let header = try? JSONParser.parse(headerData, duplicateKeys: .lastWins),
            let claims = try? JSONParser.parse(claimsData, duplicateKeys: .lastWins)
        else {
            throw refuse("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        guard header["alg"]?.stringValue == "RS256" else {
            throw refuse("Invalid JWT signing algorithm; expected RS256.")
        }
        let signed = Data((parts[0] + "." + parts[1]).utf8)
        guard
            publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: signed),
                padding: .insecurePKCS1v1_5)
        else { throw refuse("Invalid JWT Signature.") }
        guard let issuer = claims["iss"]?.stringValue, !issuer.isEmpty else { throw refuse("Invalid JWT: no iss.") }
        guard claims["aud"]?.stringValue == audience else {
            throw refuse("Invalid JWT: aud must be the token endpoint \(audience).")
        }
        guard case .int(let issuedAt)? = claims["iat"], case .int(let expiresAt)? = claims["exp"] else {
            throw refuse("Invalid JWT: iat and exp must be whole epoch seconds.")
        }
        guard expiresAt > now, issuedAt <= now + 60, expiresAt - issuedAt <= maximumLifetime, expiresAt > issuedAt
        else {
            throw refuse(
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check "
                    + "your iat and exp values in the JWT claim.")
        }
        guard let scope = claims["scope"]?.stringValue, !scope.isEmpty else {
            throw Refusal(error: "invalid_scope", description: "Invalid OAuth scope or ID token audience provided.")
        }
        return Claims(
            issuer: issuer, scope: scope, audience: audience, issuedAt: issuedAt, expiresAt: expiresAt,
            keyID: header["kid"]?.stringValue)
    }
}
