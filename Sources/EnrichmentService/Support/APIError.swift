import EnrichmentCore
import Foundation
import Hummingbird

/// The one error shape of the API: `{"error": {"reason": "...", "message": "..."}}` with an HTTP status.
///
/// Domain errors know nothing about HTTP; `APIError.from(_:)` is the single place that maps them to statuses.
public struct APIError: Error, HTTPResponseError, Sendable {
    public var status: HTTPResponse.Status
    /// Machine-readable reason (`invalid_json`, `payload_too_large`, `not_found`...).
    public var reason: String
    /// A sentence for people: what is wrong and what to do.
    public var message: String
    public var headers: HTTPFields = [:]
    /// Extra machine-readable members of the error object (e.g. `parameter` and `position` of a query syntax error).
    public var details: [String: JSONValue] = [:]

    public init(_ status: HTTPResponse.Status, reason: String, message: String, details: [String: JSONValue] = [:]) {
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var error = details
        error["reason"] = .string(reason)
        error["message"] = .string(message)
        let body = JSONValue.object(["error": .object(error)])
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers,
                        body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(body))))
    }

    static func invalid(_ reason: String, _ message: String) -> APIError { APIError(.badRequest, reason: reason, message: message) }

    /// Maps any error thrown by a handler to the API's error shape.
    static func from(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as PayloadError:
            switch error {
            case .tooLarge, .cannotFit:
                return APIError(.contentTooLarge, reason: "payload_too_large", message: error.description)
            default:
                return APIError(.badRequest, reason: "invalid_payload", message: error.description)
            }
        case let error as OpenLocateError:
            return APIError(.badRequest, reason: "invalid_batch", message: error.description)
        case let error as PlaceFilterSyntaxError:
            return APIError(.badRequest, reason: "invalid_query", message: error.description,
                            details: ["parameter": .string("query"), "position": .int(Int64(error.position))])
        case let error as POIImportError:
            return APIError(.badRequest, reason: "invalid_import", message: error.description)
        case let error as HTTPError:
            switch error.status {
            case .notFound: return APIError(.notFound, reason: "not_found", message: "no such endpoint; see the README for the API")
            case .contentTooLarge: return APIError(.contentTooLarge, reason: "body_too_large", message: error.body ?? "request body too large")
            case .methodNotAllowed: return APIError(.methodNotAllowed, reason: "method_not_allowed", message: "method not allowed on this endpoint")
            default: return APIError(error.status, reason: "http_\(error.status.code)", message: error.body ?? error.status.reasonPhrase)
            }
        default:
            return APIError(.internalServerError, reason: "internal_error",
                            message: "the server failed to handle the request; the log has details")
        }
    }
}

/// Turns every error into the API's JSON error shape, logging server-side failures.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let mapped = APIError.from(error)
            if mapped.status == .internalServerError {
                context.logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            }
            return try mapped.response(from: request, context: context)
        }
    }
}
