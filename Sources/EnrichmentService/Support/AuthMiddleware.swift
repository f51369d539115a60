import Crypto
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// Finds the request's key (`Authorization: Bearer <key>`, or for the SDK-compatible search `private_key`/`key` in
/// the query) among the service's keys and runs the request in its scope (`AppScope.current`): the key's app, or
/// for an admin key the app named by `Enrich-App` (default: `default`). Without any key configured every request
/// is an admin's.
/// Paths that stay open (health checks and scraping).
private let openPaths: Set<String> = ["/health", "/health/live", "/health/ready", "/metrics"]

struct AuthMiddleware<Context: RequestContext>: RouterMiddleware {
    let keys: APIKeyRing

    /// The preview pages' browser session (see `PreviewSession`); nil without an admin key.
    let previewSession: PreviewSession?

    /// Now, in epoch seconds (the service's clock), to judge a preview session's age.
    let now: @Sendable () -> Double

    init(keys: APIKeyRing, now: @escaping @Sendable () -> Double) {
        self.keys = keys
        previewSession = keys.previewSecret.map(PreviewSession.init(apiKey:))
        self.now = now
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        // Compared as the router matches paths: `/health/` and `//health` are `/health`.
        let path = RouteTable.normalized(request.uri.path)
        if openPaths.contains(path) { return try await next(request, context) }
        let requested = request.headers[AppScope.headerName]
        guard !keys.isEmpty else {
            let scope = try keys.scope(key: nil, requested: requested)
            return try await AppScope.$current.withValue(scope) { try await next(request, context) }
        }
        let isPreview = path == "/preview" || path.hasPrefix("/preview/")
        // The sign-in form checks the key it is posted itself; a signed-in browser opens the preview pages.
        if path == PreviewRoutes.signInPath || (isPreview && previewSession?.isSignedIn(request, now: now()) == true) {
            return try await next(request, context)
        }
        var presented = APIKeyRing.bearer(request.headers)
        if presented == nil, path.hasPrefix("/stores/search") {
            // Read as the search itself reads its query string (form encoding).
            let parameters = (try? request.formQuery()) ?? [:]
            presented = parameters["private_key"] ?? parameters["key"]
        }
        guard let presented, let key = keys.match(presented) else {
            // A browser asking for a preview page gets the sign-in form rather than a JSON error.
            if isPreview {
                return PreviewRoutes.html(PreviewPage.renderSignIn(action: PreviewRoutes.signInPath), .unauthorized)
            }
            var error = APIError(
                .unauthorized, reason: .unauthorized,
                message: "send one of the service's API keys as 'Authorization: Bearer <key>'")
            error.headers[.wwwAuthenticate] = "Bearer"
            throw error
        }
        // The preview pages are an admin's (they search every POI and read any device of the default app).
        if isPreview, key.access != .admin {
            throw AppScope(app: key.app ?? AppNamespace.defaultApp, access: key.access, keyName: key.name)
                .forbidden(.admin)
        }
        let scope = try keys.scope(key: key, requested: requested)
        return try await AppScope.$current.withValue(scope) { try await next(request, context) }
    }
}
