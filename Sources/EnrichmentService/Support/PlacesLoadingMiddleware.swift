import EnrichmentRuntime
import Hummingbird

/// While the places index loads at start-up, a request that may need it (every `/v1` route: enrichment, fixes
/// and their POI regions, pushes, previews, searches) waits for it, up to `wait`; past that it is answered 503
/// `places_loading` with `Retry-After: 1`, nothing done. Health and metrics answer at once.
struct PlacesLoadingMiddleware<Context: RequestContext>: RouterMiddleware {
    let loading: PlacesLoading
    let wait: Duration

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if loading.isLoaded || !request.uri.path.hasPrefix("/v1/") { return try await next(request, context) }
        guard await loading.wait(timeout: wait) else {
            throw PlacesStillLoading(problem: loading.problem ?? "the places index is loading")
        }
        return try await next(request, context)
    }
}

/// The places index was not in within the request's wait.
struct PlacesStillLoading: Error, CustomStringConvertible {
    var problem: String
    var description: String { "\(problem); the service answers once it is in: retry shortly" }
}
