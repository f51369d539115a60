import Crypto
import Essentials
import Foundation
import HTTPTypes
import Hummingbird

/// The preview page's sign-in for a browser, which cannot send a bearer header: the API key is posted once from a
/// form (`POST /preview/login`, never in a URL) and the browser keeps a session cookie, `HttpOnly` (no script can
/// read it), `SameSite=Strict` (no other site's page or form can send it), limited to `/preview`, and `Secure`
/// when the request came over HTTPS (`X-Forwarded-Proto: https` from a TLS proxy).
///
/// The cookie is not the key: it is the time it was issued and an HMAC of that time under the key, so it opens
/// the preview pages only, the server refuses it once `maxAge` has passed since it was issued (whatever the
/// browser keeps), a new key signs every browser out, and no state is kept on the server.
struct PreviewSession: Sendable {
    static let cookieName = "enrich_preview"
    /// Twelve hours.
    static let maxAge = 43_200
    private let key: Secret

    init(apiKey: Secret) {
        key = apiKey
    }

    /// The cookie's value for a session issued at `issuedAt` (epoch seconds).
    func token(issuedAt: Int64) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("push-enrichment preview session v2 \(issuedAt)".utf8),
            using: SymmetricKey(data: Data(key.exposed.utf8)))
        return "\(issuedAt).\(Base64URL.encode(Data(mac), padded: false))"
    }

    /// True when the request carries a cookie this key issued no more than `maxAge` seconds before `now`
    /// (compared by digest, so the time taken does not say how much of it matched).
    func isSignedIn(_ request: Request, now: Double) -> Bool {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == Self.cookieName else {
                    continue
                }
                let presented = parts[1].trimmingCharacters(in: .whitespaces)
                guard let dot = presented.firstIndex(of: "."), let issuedAt = Int64(presented[..<dot]) else {
                    continue
                }
                let age = now - Double(issuedAt)
                guard age >= -60, age <= Double(Self.maxAge) else { continue }
                if SHA256.hash(data: Data(presented.utf8)) == SHA256.hash(data: Data(token(issuedAt: issuedAt).utf8)) {
                    return true
                }
            }
        }
        return false
    }

    /// The `Set-Cookie` value that signs a browser in at `now`.
    func signInCookie(now: Double, secure: Bool) -> String {
        "\(Self.cookieName)=\(token(issuedAt: Int64(now.rounded(.down)))); Path=/preview; Max-Age=\(Self.maxAge); "
            + "HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The `Set-Cookie` value that signs a browser out.
    static let signOutCookie = "\(cookieName)=; Path=/preview; Max-Age=0; HttpOnly; SameSite=Strict"

    /// True when the request reached the service over HTTPS through a proxy that says so.
    static func cameOverHTTPS(_ request: Request) -> Bool {
        guard let name = HTTPField.Name("X-Forwarded-Proto"), let proto = request.headers[name] else { return false }
        return proto.lowercased() == "https"
    }
}
