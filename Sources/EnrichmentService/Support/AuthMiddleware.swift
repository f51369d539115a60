import Crypto
import EnrichmentCore
import Essentials
import Foundation
import Hummingbird

/// Requires `Authorization: Bearer <key>` (or, for the SDK-compatible search, `private_key`/`key` in the query).
struct AuthMiddleware<Context: RequestContext>: RouterMiddleware {
    let keyDigest: [UInt8]
    /// Paths that stay open (health checks and scraping).
    static var openPaths: Set<String> { ["/health", "/health/live", "/health/ready", "/metrics"] }

    /// The preview pages' browser session (see `PreviewSession`).
    let previewSession: PreviewSession

    /// Now, in epoch seconds (the service's clock), to judge a preview session's age.
    let now: @Sendable () -> Double

    init(apiKey: Secret, now: @escaping @Sendable () -> Double) {
        keyDigest = Array(SHA256.hash(data: Data(apiKey.exposed.utf8)))
        previewSession = PreviewSession(apiKey: apiKey)
        self.now = now
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        // Compared as the router matches paths: `/health/` and `//health` are `/health`.
        let path = "/" + RouteTable.segments(request.uri.path).joined(separator: "/")
        if Self.openPaths.contains(path) { return try await next(request, context) }
        let isPreview = path == "/preview" || path.hasPrefix("/preview/")
        // The sign-in form checks the key it is posted itself; a signed-in browser opens the preview pages.
        if path == PreviewRoutes.signInPath || (isPreview && previewSession.isSignedIn(request, now: now())) {
            return try await next(request, context)
        }
        var presented: String?
        if let header = request.headers[.authorization] {
            let parts = header.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { presented = String(parts[1]) }
        }
        if presented == nil, path.hasPrefix("/stores/search") {
            // Read as the search itself reads its query string (form encoding).
            let parameters = (try? request.formQuery()) ?? [:]
            presented = parameters["private_key"] ?? parameters["key"]
        }
        // Compare digests so the comparison time does not depend on how much of the key matched.
        guard let presented, Array(SHA256.hash(data: Data(presented.utf8))) == keyDigest else {
            // A browser asking for a preview page gets the sign-in form rather than a JSON error.
            if isPreview {
                return PreviewRoutes.html(PreviewPage.renderSignIn(action: PreviewRoutes.signInPath), .unauthorized)
            }
            var error = APIError(
                .unauthorized, reason: .unauthorized,
                message: "send the service's API key as 'Authorization: Bearer <key>'")
            error.headers[.wwwAuthenticate] = "Bearer"
            throw error
        }
        return try await next(request, context)
    }
}
