public import Essentials
import Foundation

/// What happened to a payload, and the enriched payload to send.
public struct EnrichmentResult: Sendable {
    /// The overall outcome.
    public enum Outcome: String, Sendable {
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

    /// A POI in the result, nearest first: the search's match, its fields read from it (a match from the local
    /// index is written into the answer from its packed record, with no strings made).
    public struct POIUsed: Sendable {
        var match: PlaceMatch

        init(_ match: PlaceMatch) { self.match = match }

        /// The POI, decoded (each field read below decodes it again for a POI from the places index: read this
        /// once where several are needed).
        public var poi: POI { match.poi }

        public var storeId: String {
            get { match.storeId }
            set { match.poi.storeId = newValue }
        }
        public var name: String {
            get { match.poi.name }
            set { match.poi.name = newValue }
        }
        public var latitude: Double {
            get { match.coordinate.latitude }
            set { match.poi.coordinate.latitude = newValue }
        }
        public var longitude: Double {
            get { match.coordinate.longitude }
            set { match.poi.coordinate.longitude = newValue }
        }
        public var distance: Double {
            get { match.distance }
            set { match.distance = newValue }
        }
        public var city: String? {
            get { match.poi.address.city }
            set { match.poi.address.city = newValue }
        }
        public var zipcode: String? {
            get { match.poi.address.zipcode }
            set { match.poi.address.zipcode = newValue }
        }
        public var countryCode: String? {
            get { match.poi.address.countryCode }
            set { match.poi.address.countryCode = newValue }
        }
        public var types: [String] {
            get { match.poi.types }
            set { match.poi.types = newValue }
        }
        public var tags: [String] {
            get { match.poi.tags }
            set { match.poi.tags = newValue }
        }

        /// Writes the POI's members into the answer's object for it.
        func write(into p: inout JSONObjectWriter) {
            switch match.source {
            case .packed(let record):
                record.writeAnswerFields(distance: match.distance, into: &p)
            case .poi(let poi):
                p.field("store_id", poi.storeId)
                p.field("name", poi.name)
                p.field("latitude", poi.coordinate.latitude)
                p.field("longitude", poi.coordinate.longitude)
                p.field("distance", match.distance)
                p.field("city", poi.address.city)
                p.field("zipcode", poi.address.zipcode)
                p.field("country_code", poi.address.countryCode)
                p.field("types", strings: poi.types)
                p.field("tags", strings: poi.tags)
            }
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
    /// The payload to send, as a document (written out when read, for a payload enriched from a stencil: a delivery
    /// reads only `encoded`).
    public var payload: JSONValue {
        get { payloadSource.json }
        set {
            payloadSource = .document(newValue)
            encoded = nil
        }
    }
    var payloadSource: PayloadSource
    public var payloadBytes: Int
    /// `payload` as JSON, as it was written to measure it (what a delivery sends, written once); nil when
    /// the result was not made by the enricher.
    public internal(set) var encoded: [UInt8]? = nil
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
    /// The device's regions and zone used by the template, when location intelligence knows any.
    public var deviceContext: DeviceContext? = nil
    /// The staleness rules the payload was judged by (the service's, or the request's own).
    public var rules: StalenessPolicy? = nil
    /// What looks wrong in the input (a timestamp in milliseconds, a fix from after the evaluation time).
    public var hints: [String] = []

}

extension EnrichmentResult {
    /// Where the payload document comes from.
    enum PayloadSource: Sendable {
        case document(JSONValue)
        /// The push's payload with its body (and map URL) set, made into a document only when read.
        case edited(NotificationPayload, body: String, attachment: String?)

        var json: JSONValue {
            switch self {
            case .document(let json): return json
            case .edited(let payload, let body, let attachment):
                return payload.edited(body: body, attachment: attachment).json
            }
        }
    }

    /// The result as the API's JSON object (snake_case keys, nil members left out), written straight to bytes.
    public func encodedJSON() -> [UInt8] {
        var o = JSONObjectWriter(capacity: 2048)
        o.field("outcome", outcome.rawValue)
        o.field("rule", rule)
        o.field("mode", mode.rawValue)
        if let staleness { o.object("staleness") { staleness.write(into: &$0) } }
        if let rules {
            o.object("rules") { r in
                r.field("window", rules.window)
                if let skew = rules.maxFutureSkew {
                    r.field("max_future_skew", skew)
                } else {
                    r.field("max_future_skew", json: .null)
                }
            }
        }
        if !hints.isEmpty { o.field("hints", strings: hints) }
        o.field("legacy_shape", legacyShape)
        o.object("notification") { n in
            n.field("title", notification.title)
            n.field("subtitle", notification.subtitle)
            n.field("body", notification.body)
            n.field("attachment_url", notification.attachmentURL)
        }
        // The payload as it was written to measure it (the same writer, the same bytes), not written again.
        if let encoded { o.field("payload", rawJSON: encoded) } else { o.field("payload", json: payload) }
        o.field("payload_bytes", payloadBytes)
        o.field("body_truncated", bodyTruncated)
        if let fix {
            o.object("fix") { f in
                f.field("latitude", fix.latitude)
                f.field("longitude", fix.longitude)
                f.field("fix_time", fix.fixTime)
                f.field("age_seconds", fix.ageSeconds)
                f.field("horizontal_accuracy", fix.horizontalAccuracy)
                f.field("context", fix.context)
            }
        }
        o.array("pois", pois) { poi, p in poi.write(into: &p) }
        o.field("static_map_url", staticMapURL)
        o.field("places_provider", placesProvider)
        o.field("places_ms", placesMilliseconds)
        if let degraded {
            o.object("degraded") { d in
                d.field("reason", degraded.reason)
                d.field("message", degraded.message)
            }
        }
        if let deviceContext, !deviceContext.isEmpty { o.field("device_context", object: deviceContext) }
        o.field("evaluated_at", evaluatedAt)
        return o.finished()
    }
}

extension StalenessVerdict {
    /// Writes the verdict's fields (snake_case, nil members left out).
    public func write(into o: inout JSONObjectWriter) {
        o.field("state", state.rawValue)
        o.field("rule", rule.rawValue)
        o.field("timestamp", timestamp)
        o.field("age_seconds", ageSeconds)
        o.field("source", source?.rawValue)
        o.field("detail", detail)
    }
}
