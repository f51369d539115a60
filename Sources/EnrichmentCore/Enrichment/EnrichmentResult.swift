import Foundation

/// What happened to a payload, and the enriched payload to send.
public struct EnrichmentResult: Sendable {
    /// The overall outcome.
    public enum Outcome: String, Sendable, Codable {
        /// Body rewritten with POI data (and map attachment when configured).
        case enriched
        /// Delivered as received: not a location push, not mutable, or no visible alert.
        case unchanged
        /// Timestamp older than the window (woosmap: body `OUT OF TIME`).
        case stale
        /// No usable timestamp (woosmap: body `No timestamp`).
        case noTimestamp = "no_timestamp"
        /// No fix for the device, or its last fix is older than the configured max age.
        case noFix = "no_fix"
        /// The places search found nothing; body left unchanged, map has one marker.
        case noPOI = "no_poi"
        /// An upstream failed or timed out; location-only (or SDK error) body.
        case degraded
    }

    /// The fix used, with its age at evaluation time.
    public struct FixUsed: Sendable {
        public var latitude: Double
        public var longitude: Double
        public var fixTime: Double
        public var ageSeconds: Double
        public var horizontalAccuracy: Double?
        public var context: String?

    }

    /// A POI in the result, nearest first.
    public struct POIUsed: Sendable {
        public var storeId: String
        public var name: String
        public var latitude: Double
        public var longitude: Double
        public var distance: Double
        public var city: String?
        public var zipcode: String?
        public var countryCode: String?
        public var types: [String]
        public var tags: [String]


        init(_ match: PlaceMatch) {
            storeId = match.poi.storeId
            name = match.poi.name
            latitude = match.poi.coordinate.latitude
            longitude = match.poi.coordinate.longitude
            distance = match.distance
            city = match.poi.address.city
            zipcode = match.poi.address.zipcode
            countryCode = match.poi.address.countryCode
            types = match.poi.types
            tags = match.poi.tags
        }
    }

    /// The notification as the phone would show it.
    public struct Notification: Sendable {
        public var title: String?
        public var subtitle: String?
        public var body: String?
        public var attachmentURL: String?

    }

    /// Why the result is degraded.
    public struct Degradation: Sendable, Equatable {
        public var reason: String
        public var message: String
    }

    public var outcome: Outcome
    /// The rule that decided the outcome (e.g. `older_than_window`, `category_not_location`, `fix_too_old`).
    public var rule: String
    public var mode: BodyMode
    public var staleness: StalenessVerdict?
    /// True when the legacy top-level shape (`timestamp`/`location`) was used (default mode only).
    public var legacyShape: Bool
    public var payload: JSONValue
    public var payloadBytes: Int
    /// True when the body had to be shortened to keep the payload within 4096 bytes.
    public var bodyTruncated: Bool
    public var notification: Notification
    public var fix: FixUsed?
    public var pois: [POIUsed]
    public var staticMapURL: String?
    public var placesProvider: String?
    public var degraded: Degradation?
    /// The instant the payload was evaluated at, epoch seconds.
    public var evaluatedAt: Double
    /// Milliseconds spent on the places search, when one ran.
    public var placesMilliseconds: Double?

}

/// Builds JSON objects, leaving out nil members (as `JSONEncoder` does).
struct JSONObjectBuilder {
    var members: [String: JSONValue] = [:]
    mutating func set(_ key: String, _ value: String?) { if let value { members[key] = .string(value) } }
    mutating func set(_ key: String, _ value: Double?) { if let value { members[key] = .double(value) } }
    mutating func set(_ key: String, _ value: Int64?) { if let value { members[key] = .int(value) } }
    mutating func set(_ key: String, _ value: Int?) { if let value { members[key] = .int(Int64(value)) } }
    mutating func set(_ key: String, _ value: Bool) { members[key] = .bool(value) }
    mutating func set(_ key: String, _ value: JSONValue?) { if let value { members[key] = value } }
    mutating func set(_ key: String, _ value: [String]) { members[key] = .array(value.map(JSONValue.string)) }
    var value: JSONValue { .object(members) }
}

extension EnrichmentResult {
    /// The result as the API's JSON object (snake_case keys, nil members left out).
    public var json: JSONValue {
        var o = JSONObjectBuilder()
        o.set("outcome", outcome.rawValue)
        o.set("rule", rule)
        o.set("mode", mode.rawValue)
        o.set("staleness", staleness?.json)
        o.set("legacy_shape", legacyShape)
        o.set("payload", payload)
        o.set("payload_bytes", payloadBytes)
        o.set("body_truncated", bodyTruncated)
        o.set("notification", notification.json)
        o.set("fix", fix?.json)
        o.set("pois", JSONValue.array(pois.map(\.json)))
        o.set("static_map_url", staticMapURL)
        o.set("places_provider", placesProvider)
        o.set("degraded", degraded?.json)
        o.set("evaluated_at", evaluatedAt)
        o.set("places_ms", placesMilliseconds)
        return o.value
    }
}

extension EnrichmentResult.FixUsed {
    var json: JSONValue {
        var o = JSONObjectBuilder()
        o.set("latitude", latitude)
        o.set("longitude", longitude)
        o.set("fix_time", fixTime)
        o.set("age_seconds", ageSeconds)
        o.set("horizontal_accuracy", horizontalAccuracy)
        o.set("context", context)
        return o.value
    }
}

extension EnrichmentResult.POIUsed {
    var json: JSONValue {
        var o = JSONObjectBuilder()
        o.set("store_id", storeId)
        o.set("name", name)
        o.set("latitude", latitude)
        o.set("longitude", longitude)
        o.set("distance", distance)
        o.set("city", city)
        o.set("zipcode", zipcode)
        o.set("country_code", countryCode)
        o.set("types", types)
        o.set("tags", tags)
        return o.value
    }
}

extension EnrichmentResult.Notification {
    var json: JSONValue {
        var o = JSONObjectBuilder()
        o.set("title", title)
        o.set("subtitle", subtitle)
        o.set("body", body)
        o.set("attachment_url", attachmentURL)
        return o.value
    }
}

extension EnrichmentResult.Degradation {
    var json: JSONValue { .object(["reason": .string(reason), "message": .string(message)]) }
}

extension StalenessVerdict {
    /// The verdict as JSON (snake_case keys, nil members left out).
    public var json: JSONValue {
        var o = JSONObjectBuilder()
        o.set("state", state.rawValue)
        o.set("rule", rule.rawValue)
        o.set("timestamp", timestamp)
        o.set("age_seconds", ageSeconds)
        o.set("source", source?.rawValue)
        o.set("detail", detail)
        return o.value
    }
}
