import Foundation

/// What happened to a payload, and the enriched payload to send.
public struct EnrichmentResult: Sendable, Encodable {
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
    public struct FixUsed: Sendable, Encodable {
        public var latitude: Double
        public var longitude: Double
        public var fixTime: Double
        public var ageSeconds: Double
        public var horizontalAccuracy: Double?
        public var context: String?

        enum CodingKeys: String, CodingKey {
            case latitude, longitude, context
            case fixTime = "fix_time", ageSeconds = "age_seconds", horizontalAccuracy = "horizontal_accuracy"
        }
    }

    /// A POI in the result, nearest first.
    public struct POIUsed: Sendable, Encodable {
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

        enum CodingKeys: String, CodingKey {
            case name, latitude, longitude, distance, city, zipcode, types, tags
            case storeId = "store_id", countryCode = "country_code"
        }

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
    public struct Notification: Sendable, Encodable {
        public var title: String?
        public var subtitle: String?
        public var body: String?
        public var attachmentURL: String?

        enum CodingKeys: String, CodingKey {
            case title, subtitle, body
            case attachmentURL = "attachment_url"
        }
    }

    /// Why the result is degraded.
    public struct Degradation: Sendable, Encodable, Equatable {
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

    enum CodingKeys: String, CodingKey {
        case outcome, rule, mode, staleness, payload, notification, fix, pois, degraded
        case legacyShape = "legacy_shape", payloadBytes = "payload_bytes", bodyTruncated = "body_truncated"
        case staticMapURL = "static_map_url", placesProvider = "places_provider", evaluatedAt = "evaluated_at"
        case placesMilliseconds = "places_ms"
    }
}
