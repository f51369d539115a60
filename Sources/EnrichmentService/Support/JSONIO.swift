import EnrichmentCore
import Essentials
import Foundation
import Hummingbird
import NIOCore

/// Reading JSON request bodies and writing JSON responses, with the API's error reasons.
enum JSONIO {
    /// Collects the body (at most `limit` bytes) and parses it as a JSON document.
    static func readJSON(_ request: Request, limit: Int) async throws -> JSONValue {
        let data = try await readJSONBody(request, limit: limit)
        do {
            return try JSONValue.decode(data)
        } catch {
            throw invalidJSON(error)
        }
    }

    /// The body of a request that must carry a JSON document, not parsed yet: its Content-Type checked, its size
    /// bounded, an empty one refused.
    static func readJSONBody(_ request: Request, limit: Int) async throws -> Data {
        try requireJSONContentType(request)
        let data = try await readBody(request, limit: limit)
        guard !data.isEmpty else { throw APIError.invalid(.emptyBody, "request body is empty; send a JSON document") }
        return data
    }

    /// The answer to a body that is not JSON: where and why.
    static func invalidJSON(_ error: JSONParseError) -> APIError {
        APIError(
            .badRequest, reason: .invalidJSON, message: "request body is not valid JSON: \(error.description)",
            details: ["byte_offset": .int(Int64(error.offset))])
    }

    /// Refuses a body declared as anything but JSON (`application/json`, `application/*+json`); no
    /// Content-Type at all is read as JSON.
    static func requireJSONContentType(_ request: Request) throws {
        guard let declared = request.headers[.contentType] else { return }
        if isJSONMediaType(declared) { return }
        throw APIError(
            .unsupportedMediaType, reason: .unsupportedMediaType,
            message: "Content-Type '\(declared)' is not accepted here; send the body as application/json")
    }

    /// Whether a Content-Type's media type (before any `;` parameters, spaces and tabs around it ignored, in any
    /// case) is `application/json` or `application/*+json`. Read byte by byte: it runs for every request with a
    /// body, and the Foundation trimming and lowercasing it replaced took 15 µs of a 330 µs enrichment
    /// (BENCHMARKS.md, "Enrichment at the server's own speed").
    static func isJSONMediaType(_ declared: String) -> Bool {
        var utf8 = Substring(declared).utf8
        if let semicolon = utf8.firstIndex(of: UInt8(ascii: ";")) { utf8 = utf8[..<semicolon] }
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        while let first = utf8.first, blank(first) { utf8 = utf8.dropFirst() }
        while let last = utf8.last, blank(last) { utf8 = utf8.dropLast() }
        // ASCII letters compared without case; nothing is copied.
        let same: (UInt8, UInt8) -> Bool = { ($0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0) == $1 }
        let prefix = "application/".utf8
        guard utf8.count > prefix.count, utf8.starts(with: prefix, by: same) else { return false }
        let subtype = utf8.dropFirst(prefix.count)
        return subtype.elementsEqual("json".utf8, by: same)
            || (subtype.count > 5 && subtype.suffix(5).elementsEqual("+json".utf8, by: same))
    }

    /// Collects the body, refusing more than `limit` bytes with 413.
    static func readBody(_ request: Request, limit: Int) async throws -> Data {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw APIError(
                .contentTooLarge, reason: .bodyTooLarge,
                message: "request body is \(length) bytes; at most \(limit) are accepted")
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return Data(buffer.readableBytesView)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            // Chunked bodies (no Content-Length) end here, with NIO's too-many-bytes error.
            throw APIError(
                .contentTooLarge, reason: .bodyTooLarge,
                message: "request body exceeds \(limit) bytes; at most \(limit) are accepted")
        }
    }

    /// A JSON response from already encoded bytes.
    static func response(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A JSON response from a value that writes itself (the one way responses are written).
    static func response(_ value: some JSONObjectRepresentable, status: HTTPResponse.Status = .ok) -> Response {
        response(bytes: value.jsonBytes, status: status)
    }
}
