import Essentials
import Foundation

/// Writes a body into a payload, shortening it (never the rest of the payload) to stay within APNs' limit.
public enum PayloadFitter {
    /// The marker appended to a shortened body.
    public static let ellipsis = "…"

    /// The payload with `body` set and its JSON, written once: when it fits (nearly always) the text written to
    /// measure it is the text to send; only a body too long is searched for its longest prefix (`fit`).
    public static func fitEncoded(
        body: String, into payload: NotificationPayload,
        limit: Int = NotificationPayload.maximumSize
    ) throws -> (payload: NotificationPayload, truncated: Bool, bytes: [UInt8]) {
        let full = payload.replacingBody(body)
        let bytes = JSONWriter.bytes(full.json)
        if bytes.count <= limit { return (full, false, bytes) }
        // The size with an empty body follows from the one written: the body is one string value.
        let (shortened, truncated, _) = try fit(
            body: body, into: payload, limit: limit, emptySize: bytes.count - JSONWriter.escapedLength(body))
        return (shortened, truncated, JSONWriter.bytes(shortened.json))
    }

    /// Returns the payload with `body` set, whether the body had to be shortened, and the encoded size.
    ///
    /// The payload is encoded once with an empty body; since the body is one string value, the size with any
    /// body is that size plus the body's escaped length, which makes the search for the longest prefix cheap.
    public static func fit(
        body: String, into payload: NotificationPayload,
        limit: Int = NotificationPayload.maximumSize
    ) throws -> (payload: NotificationPayload, truncated: Bool, size: Int) {
        try fit(body: body, into: payload, limit: limit, emptySize: payload.replacingBody("").encodedSize)
    }

    /// `fit` given the payload's encoded size with an empty body.
    static func fit(
        body: String, into payload: NotificationPayload, limit: Int, emptySize: Int
    ) throws -> (payload: NotificationPayload, truncated: Bool, size: Int) {
        let fullSize = emptySize + JSONWriter.escapedLength(body)
        if fullSize <= limit { return (payload.replacingBody(body), false, fullSize) }
        let ellipsisLength = JSONWriter.escapedLength(ellipsis)
        guard emptySize + ellipsisLength <= limit else {
            throw PayloadError.cannotFit(minimumBytes: emptySize + ellipsisLength, limit: limit)
        }
        // Keep whole characters while they fit.
        var budget = limit - emptySize - ellipsisLength
        var kept = ""
        for character in body {
            let length = JSONWriter.escapedLength(String(character))
            if length > budget { break }
            budget -= length
            kept.append(character)
        }
        let shortened = kept + ellipsis
        return (payload.replacingBody(shortened), true, emptySize + JSONWriter.escapedLength(shortened))
    }
}
