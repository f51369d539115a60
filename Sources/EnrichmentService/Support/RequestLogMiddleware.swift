import Hummingbird
import Logging

/// One log line per request at debug: the method, the path and the status. The query string is never logged (a
/// store search may carry an API key in `private_key`), nor any header. Inside the request's span, so with
/// tracing on the line carries the trace id.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            log(request, context: context, status: response.status.code, started: started)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            log(request, context: context, status: status, started: started)
            throw error
        }
    }

    private func log(_ request: Request, context: Context, status: Int, started: ContinuousClock.Instant) {
        context.logger.debug(
            "request",
            metadata: [
                "method": "\(request.method.rawValue)", "path": "\(request.uri.path)", "status": "\(status)",
                "took": "\(ContinuousClock.now - started)",
            ])
    }
}
