import Crypto
import Essentials
import Foundation
import Hummingbird

/// The preview page's sign-in for a browser, which cannot send a bearer header: the API key is posted once from a
/// form (`POST /preview/login`, never in a URL) and the browser keeps a session cookie, `HttpOnly` (no script can
/// read it), `SameSite=Strict` (no other site's page or form can send it) and limited to `/preview`.
///
/// The cookie is not the key: it is an HMAC of a fixed label under the key, so it opens the preview pages only,
/// stays valid while the key does (a new key signs every browser out), and needs no state on the server.
struct PreviewSession: Sendable {
    static let cookieName = "enrich_preview"
    /// Twelve hours.
    static let maxAge = 43_200
    private let tokenDigest: [UInt8]
    private let token: String

    init(apiKey: Secret) {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("push-enrichment preview session v1".utf8), using: SymmetricKey(data: Data(apiKey.exposed.utf8)))
        token = Base64URL.encode(Data(mac), padded: false)
        tokenDigest = Array(SHA256.hash(data: Data(token.utf8)))
    }

    /// True when the request carries this session's cookie (compared by digest, in constant time per length).
    func isSignedIn(_ request: Request) -> Bool {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == Self.cookieName else {
                    continue
                }
                let presented = parts[1].trimmingCharacters(in: .whitespaces)
                if Array(SHA256.hash(data: Data(presented.utf8))) == tokenDigest { return true }
            }
        }
        return false
    }

    /// The `Set-Cookie` value that signs a browser in.
    var signInCookie: String {
        "\(Self.cookieName)=\(token); Path=/preview; Max-Age=\(Self.maxAge); HttpOnly; SameSite=Strict"
    }

    /// The `Set-Cookie` value that signs a browser out.
    static let signOutCookie = "\(cookieName)=; Path=/preview; Max-Age=0; HttpOnly; SameSite=Strict"
}
