public import Crypto
public import Essentials
public import Foundation
import Synchronization

/// Provider authentication tokens: ES256 JWTs with `kid` in the header and `iss`/`iat` (whole seconds) as claims.
public enum APNsJWT {
    /// Apple refuses tokens older than this.
    public static let maximumAge: Int64 = 3600

    /// Makes a signed token.
    public static func sign(keyID: String, teamID: String, issuedAt: Int64, key: P256.Signing.PrivateKey) throws
        -> String
    {
        let header = base64URL(Data(#"{"alg":"ES256","kid":"\#(escape(keyID))"}"#.utf8))
        let claims = base64URL(Data(#"{"iss":"\#(escape(teamID))","iat":\#(issuedAt)}"#.utf8))
        let signingInput = header + "." + claims
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + base64URL(signature.rawRepresentation)
    }

    /// The parts of a verified token.
    public struct Claims: Sendable, Equatable {
        public var keyID: String
        public var teamID: String
        public var issuedAt: Int64

        public init(keyID: String, teamID: String, issuedAt: Int64) {
            self.keyID = keyID
            self.teamID = teamID
            self.issuedAt = issuedAt
        }
    }

    /// Checks a token as APNs does: shape, ES256 signature with `publicKey`, `kid` and `iss` present, `iat` within
    /// the last hour (and not in the future beyond a minute of clock skew). Throws the reason Apple would give.
    public static func verify(
        _ token: String, publicKey: P256.Signing.PublicKey, expectedKeyID: String?,
        expectedTeamID: String?, now: Int64
    ) throws(APNsValidator.Violation) -> Claims {
        func invalid(_ message: String) -> APNsValidator.Violation {
            .init(reason: .invalidProviderToken, message: message)
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = decodeBase64URL(String(parts[0])),
            let claimsData = decodeBase64URL(String(parts[1])), let signatureData = decodeBase64URL(String(parts[2]))
        else { throw invalid("the provider token is not a JWT (three base64url parts)") }
        guard let header = try? JSONParser.parse(headerData, duplicateKeys: .lastWins),
            let claims = try? JSONParser.parse(claimsData, duplicateKeys: .lastWins)
        else {
            throw invalid("the provider token's header or claims are not JSON")
        }
        guard header["alg"]?.stringValue == "ES256" else { throw invalid("the provider token must use alg ES256") }
        guard let keyID = header["kid"]?.stringValue, !keyID.isEmpty else {
            throw invalid("the provider token has no kid")
        }
        guard let teamID = claims["iss"]?.stringValue, !teamID.isEmpty else {
            throw invalid("the provider token has no iss (team id)")
        }
        guard let issuedAt = claims["iat"].flatMap(Self.epochSeconds) else {
            throw invalid("the provider token's iat must be whole epoch seconds (a number, or its decimal string)")
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else { throw invalid("the provider token's signature does not verify with the configured key") }
        if let expectedKeyID, keyID != expectedKeyID {
            throw .init(
                reason: .unrelatedKeyIdInToken, message: "kid \(keyID) is not the configured key \(expectedKeyID)")
        }
        if let expectedTeamID, teamID != expectedTeamID {
            throw invalid("iss \(teamID) is not the configured team \(expectedTeamID)")
        }
        // 128-bit: a validly signed token may carry any 64-bit iat, and the age must not overflow.
        let age = Int128(now) - Int128(issuedAt)
        if age > Int128(maximumAge) {
            throw .init(
                reason: .expiredProviderToken,
                message: "the provider token was issued \(age) s ago; APNs accepts at most \(maximumAge) s")
        }
        if age < -60 { throw invalid("the provider token's iat is in the future") }
        return Claims(keyID: keyID, teamID: teamID, issuedAt: issuedAt)
    }

    /// The `kid` of a token's header, unverified (to pick the key that verifies it), or nil.
    public static func unverifiedKeyID(_ token: String) -> String? {
        guard let header = token.split(separator: ".", maxSplits: 1).first,
            let data = decodeBase64URL(String(header)), let json = try? JSONParser.parse(data, duplicateKeys: .lastWins)
        else { return nil }
        return json["kid"]?.stringValue
    }

    /// `iat` as APNs reads it: a JSON integer, or a string of decimal digits. RFC 7519 asks for a number, and we
    /// sign one; APNSwift 5.0 to 6.4 (and Vapor's apns on top of it) sent `"iat":"1795546748"` for years and APNs
    /// answered 200, so a stand-in for APNs must accept it too.
    static func epochSeconds(_ value: JSONValue) -> Int64? {
        switch value {
        case .int(let seconds): return seconds
        case .string(let text):
            guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                return nil
            }
            return Int64(text)
        default: return nil
        }
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }

    /// base64url without padding.
    public static func base64URL(_ data: some DataProtocol) -> String { Base64URL.encode(data, padded: false) }

    static func decodeBase64URL(_ text: String) -> Data? { Base64URL.decode(text) }
}

/// Hands out one provider token per key, reused until it is `refreshAfter` old (Apple: between 20 and 60 minutes).
public final class APNsTokenManager: Sendable {
    private struct Cached {
        var token: String
        var issuedAt: Int64
    }

    public let keyID: String
    public let teamID: String
    private let keyData: Data
    private let clock: any WallClock
    /// Seconds after which a new token is made (default 50 minutes).
    public let refreshAfter: Int64
    private let cached = Mutex<Cached?>(nil)

    /// Creates a manager for a key; `clock` decides when a token is too old.
    public init(
        keyID: String, teamID: String, key: P256.Signing.PrivateKey, clock: any WallClock = SystemWallClock(),
        refreshAfter: Int64 = 50 * 60
    ) {
        self.keyID = keyID
        self.teamID = teamID
        self.keyData = key.rawRepresentation
        self.clock = clock
        self.refreshAfter = refreshAfter
    }

    /// Loads an Apple `.p8` key (PKCS#8 PEM).
    public static func loadKey(pem: String) throws -> P256.Signing.PrivateKey {
        try P256.Signing.PrivateKey(pemRepresentation: pem)
    }

    /// The current token, making a new one when none exists or the last is `refreshAfter` old.
    public func token() throws -> String {
        let now = Int64(clock.now().timeIntervalSince1970.rounded(.down))
        return try cached.withLock { cached in
            if let current = cached, now - current.issuedAt < refreshAfter, now >= current.issuedAt {
                return current.token
            }
            let key = try P256.Signing.PrivateKey(rawRepresentation: keyData)
            let token = try APNsJWT.sign(keyID: keyID, teamID: teamID, issuedAt: now, key: key)
            cached = Cached(token: token, issuedAt: now)
            return token
        }
    }

    /// Forgets the token so the next call makes a new one (after APNs answered ExpiredProviderToken).
    public func invalidate() { cached.withLock { $0 = nil } }
}
