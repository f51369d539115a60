import EnrichmentRuntime
import Hummingbird

/// With PostgreSQL, bounds every request by `ENRICH_DATABASE_TIMEOUT`: a request still waiting for the database
/// then is cancelled (PostgresNIO gives up its wait for a connection) and answered 503 `database_unavailable` with
/// `Retry-After`; nothing was acknowledged. Without it a request would wait as long as the pool waits for a
/// database that is gone.
struct DatabaseDeadlineMiddleware<Context: RequestContext>: RouterMiddleware {
    let timeout: Duration
    /// Routes that never touch the database, or bound themselves.
    static var exempt: Set<String> { ["/health", "/health/live", "/health/ready", "/metrics"] }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if Self.exempt.contains(request.uri.path) { return try await next(request, context) }
        let timeout = self.timeout
        return try await withoutActuallyEscaping(next) { next in
            // The task group ends before this scope does, so `next` never outlives the request.
            let handler = UncheckedHandler(next: next)
            return try await withThrowingTaskGroup(of: Response.self) { group in
                group.addTask { try await handler.next(request, context) }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    throw DatabaseTimeout(timeout: timeout)
                }
                defer { group.cancelAll() }
                guard let first = try await group.next() else { throw DatabaseTimeout(timeout: timeout) }
                return first
            }
        }
    }
}

/// The request's `next`, handed to the group's child task (which ends before the request does).
private struct UncheckedHandler<Context: RequestContext>: @unchecked Sendable {
    let next: (Request, Context) async throws -> Response
}
