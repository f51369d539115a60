import EnrichmentCore
import EnrichmentRuntime
public import Essentials
import Foundation
public import Hummingbird
import Logging
import Synchronization

/// The one error shape of the API: `{"error": {"reason": "...", "message": "..."}}` with an HTTP status.
///
/// Domain errors know nothing about HTTP; `APIError.from(_:)` is the single place that maps them to statuses.
public struct APIError: Error, HTTPResponseError, Sendable, JSONObjectRepresentable {
    public var status: HTTPResponse.Status
    /// Machine-readable reason, from the one vocabulary of `APIReason`.
    public var reason: APIReason
    /// A sentence for people: what is wrong and what to do.
    public var message: String
    public var headers: HTTPFields = [:]
    /// Extra machine-readable members of the error object (e.g. `parameter` and `position` of a query syntax error).
    public var details: [String: JSONValue] = [:]

    public init(_ status: HTTPResponse.Status, reason: APIReason, message: String, details: [String: JSONValue] = [:]) {
        self.status = status
        self.reason = reason
        self.message = Self.shortened(message)
        self.details = details.mapValues { value in
            if case .string(let text) = value { return .string(Self.shortened(text)) }
            return value
        }
    }

    /// The longest span of a request's own text an error quotes back, in bytes (`'...'` in a message).
    static let quotedLimit = 200

    /// `text` with every quoted span (`'...'`) longer than `quotedLimit` cut in its middle, saying how much was
    /// cut, and the whole at most 2,048 bytes: an error about a 1 MB value says which value, not the value.
    static func shortened(_ text: String) -> String {
        guard text.utf8.count > quotedLimit else { return text }
        var result = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "'") {
            result += rest[...open]
            let after = rest[rest.index(after: open)...]
            guard let close = after.firstIndex(of: "'") else {
                rest = after
                break
            }
            result += cut(after[..<close])
            result += "'"
            rest = after[after.index(after: close)...]
        }
        result += cut(rest, limit: 2_048)
        return result.utf8.count <= 2_048 ? result : String(cut(Substring(result), limit: 2_048))
    }

    private static func cut(_ span: Substring, limit: Int = quotedLimit) -> String {
        let bytes = span.utf8.count
        guard bytes > limit else { return String(span) }
        let keep = limit / 2
        let head = String(decoding: span.utf8.prefix(keep), as: UTF8.self)
        let tail = String(decoding: span.utf8.suffix(keep / 2), as: UTF8.self)
        return "\(head)… (\(bytes - keep - keep / 2) bytes not shown) …\(tail)"
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: jsonBytes)))
    }

    /// `{"error": {...details, "message", "reason"}}`, members in alphabetical order.
    public func writeJSON(into object: inout JSONObjectWriter) {
        var members = details
        members["reason"] = .string(reason.rawValue)
        members["message"] = .string(message)
        object.object("error") { error in
            for (name, value) in members.sorted(by: { $0.key < $1.key }) { error.field(name, json: value) }
        }
    }

    /// A 400; `field` names the request member at fault (also given as `field` in the error object).
    static func invalid(_ reason: APIReason, _ message: String, field: String? = nil) -> APIError {
        APIError(.badRequest, reason: reason, message: message, details: field.map { ["field": .string($0)] } ?? [:])
    }

    /// Maps any error thrown by a handler to the API's error shape: a domain error answers as it says itself
    /// (`APIErrorConvertible`, one conformance per error type in `ErrorAnswers.swift`); the router's own errors
    /// (no route, wrong method, body too large) are mapped here; anything else is a 500.
    static func from(_ error: any Error) -> APIError {
        switch error {
        case let error as any APIErrorConvertible:
            return error.apiError
        case let error as any HTTPResponseError where error.status == .contentTooLarge:
            return APIError(.contentTooLarge, reason: .bodyTooLarge, message: "request body too large")
        case let error as HTTPError:
            switch error.status {
            case .notFound:
                return APIError(
                    .notFound, reason: .notFound,
                    message: "no such endpoint; see docs/API.md (or docs/openapi.yaml) for the API")
            case .contentTooLarge:
                return APIError(
                    .contentTooLarge, reason: .bodyTooLarge, message: error.body ?? "request body too large")
            case .methodNotAllowed:
                return APIError(
                    .methodNotAllowed, reason: .methodNotAllowed, message: "method not allowed on this endpoint")
            default:
                return APIError(
                    error.status, reason: .httpError, message: error.body ?? error.status.reasonPhrase)
            }
        case let loading as PlacesStillLoading:
            var answer = APIError(.serviceUnavailable, reason: .placesLoading, message: loading.description)
            answer.headers[.retryAfter] = "1"
            return answer
        case let timeout as DatabaseTimeout:
            var answer = APIError(.serviceUnavailable, reason: .databaseUnavailable, message: timeout.description)
            answer.headers[.retryAfter] = "5"
            return answer
        default:
            if let outage = StorageHealth.outage(in: error), let problem = outage.problem {
                if outage.reason == APIReason.storageFull.rawValue {
                    return APIError(
                        HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"), reason: .storageFull,
                        message: problem)
                }
                var answer = APIError(.serviceUnavailable, reason: .databaseUnavailable, message: problem)
                answer.headers[.retryAfter] = "5"
                return answer
            }
            return APIError(
                .internalServerError, reason: .internalError,
                message: "the server failed to handle the request; the log has details")
        }
    }
}

/// Turns every error into the API's JSON error shape, logging server-side failures.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The routes, to tell "no such path" (404) from "not with this method" (405 with `Allow`).
    let routes: RouteTable
    /// Says when the storage is lost and when it is back, once each.
    var outages = StorageOutageLog()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            // A write that went through: the database is usable (again).
            if request.method != .get, request.method != .head, response.status.code < 300 {
                outages.served(startedAt: started, logger: context.logger)
            }
            return response
        } catch {
            var mapped = APIError.from(error)
            if mapped.status == .notFound, mapped.reason == .notFound {
                let allowed = routes.allowedMethods(for: request.uri.path)
                if !allowed.isEmpty {
                    mapped = APIError(
                        .methodNotAllowed, reason: .methodNotAllowed,
                        message:
                            "\(request.method.rawValue) is not supported on \(request.uri.path); use \(allowed.joined(separator: ", "))"
                    )
                    mapped.headers[.allow] = allowed.joined(separator: ", ")
                }
            }
            if mapped.status == .internalServerError {
                context.logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            } else if mapped.reason == .databaseUnavailable || mapped.reason == .storageFull {
                outages.refused(reason: mapped.reason.rawValue, problem: mapped.message, logger: context.logger)
                context.logger.warning(
                    "request refused: storage outage",
                    metadata: [
                        "path": "\(request.uri.path)", "reason": "\(mapped.reason.rawValue)", "error": "\(error)",
                    ])
            }
            return try mapped.response(from: request, context: context)
        }
    }
}

/// Logs the start of a storage outage (the database unreachable, the disk full) once, at `error`, and its end
/// once, at `warning`, with how long it lasted: the operator sees one pair of lines per outage, besides the
/// `warning` per refused request.
final class StorageOutageLog: Sendable {
    private let since = Mutex<(started: ContinuousClock.Instant, reason: String)?>(nil)

    func refused(reason: String, problem: String, logger: Logger) {
        let first = since.withLock { since in
            guard since == nil else { return false }
            since = (ContinuousClock.now, reason)
            return true
        }
        guard first else { return }
        logger.error(
            "storage outage: requests that need the database are refused until it is back",
            metadata: ["reason": "\(reason)", "problem": "\(problem)"])
    }

    /// A write that began at `startedAt` went through. Only one that began after the outage did says it is over:
    /// a write already under way when the first refusal came may still finish, and would otherwise end the outage
    /// at once, only for the next refusal to begin another.
    func served(startedAt: ContinuousClock.Instant, logger: Logger) {
        guard
            let outage = since.withLock({ since -> (started: ContinuousClock.Instant, reason: String)? in
                guard let current = since, startedAt > current.started else { return nil }
                since = nil
                return current
            })
        else { return }
        let seconds = Double((ContinuousClock.now - outage.started) / .milliseconds(1)) / 1000
        logger.warning(
            "storage back: requests are served again",
            metadata: ["reason": "\(outage.reason)", "outage": "\(String(format: "%.1f", seconds)) s"])
    }
}
