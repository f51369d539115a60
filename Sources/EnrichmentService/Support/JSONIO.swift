import EnrichmentCore
import Foundation
import Hummingbird

/// Reading JSON request bodies and writing JSON responses, with the API's error reasons.
enum JSONIO {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Collects the body (at most `limit` bytes) and parses it as a JSON document.
    static func readJSON(_ request: Request, limit: Int) async throws -> JSONValue {
        let data = try await readBody(request, limit: limit)
        guard !data.isEmpty else { throw APIError.invalid("empty_body", "request body is empty; send a JSON document") }
        do {
            return try JSONValue.decode(data)
        } catch {
            throw APIError.invalid("invalid_json", "request body is not valid JSON: \(error.description)")
        }
    }

    /// Collects the body, refusing more than `limit` bytes with 413.
    static func readBody(_ request: Request, limit: Int) async throws -> Data {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw APIError(.contentTooLarge, reason: "body_too_large", message: "request body is \(length) bytes; at most \(limit) are accepted")
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Data(buffer.readableBytesView)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError(.contentTooLarge, reason: "body_too_large", message: "request body exceeds \(limit) bytes")
        }
    }

    /// A JSON response from a `JSONValue` (the fast path: no Codable).
    static func response(json: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        response(bytes: JSONWriter.bytes(json), status: status)
    }

    /// A JSON response from already encoded bytes.
    static func response(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A JSON response.
    static func response(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try encoder.encode(value)
        return Response(status: status, headers: [.contentType: "application/json; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(data: data)))
    }
}
