import EnrichmentRuntime
import Hummingbird

/// With PostgreSQL, bounds every request by `ENRICH_DATABASE_TIMEOUT`: a request still waiting for the database
/// then is cancelled (PostgresNIO gives up its wait for a connection) and answered 503 `database_unavailable` with
/// `Retry-After`; nothing was acknowledged. Without it a request would wait as long as the pool waits for a
/// database that is gone.
///
/// Two routes wait for something else by design: `POST /v1/push` with `"wait": true` waits up to
/// `ENRICH_PUSH_WAIT_TIMEOUT` for its deliveries (its bound is that plus the database's), and a POI import
/// (`POST /v1/pois`, up to 2M rows) takes as long as its rows do (no bound: an operator's request).
struct DatabaseDeadlineMiddleware<Context: RequestContext>: RouterMiddleware {
    let timeout: Duration
    /// The longest a `"wait": true` push (or `GET /v1/push/{id}?wait=`) waits for its deliveries.
    let pushWait: Duration
    /// Routes that never touch the database, or bound themselves.
    static var exempt: Set<String> { ["/health", "/health/live", "/health/ready", "/metrics"] }

    /// The bound of a request, or nil for none.
    func bound(_ request: Request) -> Duration? {
        let path = request.uri.path
        if Self.exempt.contains(path) { return nil }
        if request.method == .post, path == "/v1/pois" { return nil }
        if request.method == .post, path == "/v1/push" { return timeout + pushWait }
        // `GET /v1/push/{id}?wait=<seconds>` waits for the push's end, at most `pushWait`.
        if request.method == .get, path.hasPrefix("/v1/push/"), request.uri.queryParameters.get("wait") != nil {
            return timeout + pushWait
        }
        return timeout
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let timeout = bound(request) else { return try await next(request, context) }
        return try await withoutActuallyEscaping(next) { next in
            // `run` ends before this scope does (its child is awaited), so `next` never outlives the request.
            let handler = UncheckedHandler(next: next)
            return try await RequestDeadlines.shared.bounded(within: timeout) {
                try await handler.next(request, context)
            }
        }
    }
}

/// The request's `next`, handed to the group's child task (which ends before the request does).
private struct UncheckedHandler<Context: RequestContext>: @unchecked Sendable {
    let next: (Request, Context) async throws -> Response
}
