import Foundation

/// Writes a body into a payload, shortening it (never the rest of the payload) to stay within APNs' limit.
public enum PayloadFitter {
    /// The marker appended to a shortened body.
    public static let ellipsis = "…"

    /// Returns the payload with `body` set, and whether the body had to be shortened.
    public static func fit(body: String, into payload: NotificationPayload,
                           limit: Int = NotificationPayload.maximumSize) throws -> (NotificationPayload, Bool) {
        let full = payload.replacingBody(body)
        if full.encodedSize <= limit { return (full, false) }
        let empty = payload.replacingBody("")
        let minimum = empty.encodedSize + ellipsis.utf8.count
        guard minimum <= limit else { throw PayloadError.cannotFit(minimumBytes: minimum, limit: limit) }
        // Binary search on the number of characters kept; encoded size grows monotonically with the prefix.
        let characters = Array(body)
        var low = 0, high = characters.count
        while low < high {
            let mid = (low + high + 1) / 2
            if payload.replacingBody(String(characters[..<mid]) + ellipsis).encodedSize <= limit {
                low = mid
            } else {
                high = mid - 1
            }
        }
        return (payload.replacingBody(String(characters[..<low]) + ellipsis), true)
    }
}
