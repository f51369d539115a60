import Crypto
public import Essentials
import Foundation

/// The notification as the phone would show it, as one self-contained HTML page (no script, no network): the
/// app name, title, subtitle and body, and a map panel drawn locally in SVG (the fix, the POIs with their
/// distances, the search radius), with the real static-map URL as a link. The service serves it at `/preview`
/// and `push-sender simulate --html` writes it.
public enum PreviewPage {
    /// What the page shows besides the result.
    public struct Context: Sendable {
        public var appName: String
        public var deviceId: String
        /// The payload in the form's text box.
        public var payloadText: String
        /// Where the form posts (nil: no form, e.g. a file written by `simulate`).
        public var formAction: String?
        /// The places search radius, metres, drawn as a circle when known.
        public var radius: Double?

        public init(
            appName: String = "push-enrichment", deviceId: String, payloadText: String, formAction: String? = nil,
            radius: Double? = nil
        ) {
            self.appName = appName
            self.deviceId = deviceId
            self.payloadText = payloadText
            self.formAction = formAction
            self.radius = radius
        }
    }

    /// What the page shows of an enrichment, typed: made from an `EnrichmentResult` in process, or from the API's
    /// JSON when the result came over HTTP (`push-sender simulate --server`).
    public struct View: Sendable, Equatable {
        public struct Place: Sendable, Equatable {
            public var name: String
            public var coordinate: Coordinate
            public var distance: Double
        }

        public var title: String?
        public var subtitle: String?
        public var body: String
        public var attachmentURL: String?
        public var outcome: String
        public var rule: String
        public var hints: [String]
        public var staticMapURL: String?
        public var fix: Coordinate?
        public var places: [Place]
        /// Why the result is degraded, for people.
        public var degraded: String?
        /// The staleness verdict's state (`fresh`, `stale`, `no_timestamp`...) and the payload's age in seconds.
        public var stalenessState: String?
        public var ageSeconds: Int64?

        public init(_ result: EnrichmentResult) {
            title = result.notification.title
            subtitle = result.notification.subtitle
            body = result.notification.body ?? ""
            attachmentURL = result.notification.attachmentURL
            outcome = result.outcome.rawValue
            rule = result.rule
            hints = result.hints
            staticMapURL = result.staticMapURL
            fix = result.fix.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) }
            places = result.pois.map {
                Place(
                    name: $0.name, coordinate: Coordinate(latitude: $0.latitude, longitude: $0.longitude),
                    distance: $0.distance)
            }
            degraded = result.degraded?.message
            stalenessState = result.staleness?.state.rawValue
            ageSeconds = result.staleness?.ageSeconds
        }

        /// The same view from the JSON `/v1/enrich` answers.
        public init(json result: JSONValue) {
            let notification = result["notification"]
            title = notification?["title"]?.stringValue
            subtitle = notification?["subtitle"]?.stringValue
            body = notification?["body"]?.stringValue ?? ""
            attachmentURL = notification?["attachment_url"]?.stringValue
            outcome = result["outcome"]?.stringValue ?? "?"
            rule = result["rule"]?.stringValue ?? "?"
            if case .array(let items)? = result["hints"] { hints = items.compactMap(\.stringValue) } else { hints = [] }
            staticMapURL = result["static_map_url"]?.stringValue
            if let lat = result["fix"]?["latitude"]?.lenientDouble, let lng = result["fix"]?["longitude"]?.lenientDouble
            {
                fix = Coordinate(latitude: lat, longitude: lng)
            } else {
                fix = nil
            }
            var places: [Place] = []
            if case .array(let items)? = result["pois"] {
                for item in items {
                    guard let lat = item["latitude"]?.lenientDouble, let lng = item["longitude"]?.lenientDouble else {
                        continue
                    }
                    places.append(
                        Place(
                            name: item["name"]?.stringValue ?? "",
                            coordinate: Coordinate(latitude: lat, longitude: lng),
                            distance: item["distance"]?.lenientDouble ?? 0))
                }
            }
            self.places = places
            degraded = result["degraded"]?["message"]?.stringValue
            stalenessState = result["staleness"]?["state"]?.stringValue
            if case .int(let age)? = result["staleness"]?["age_seconds"] { ageSeconds = age } else { ageSeconds = nil }
        }
    }

    /// Text safe inside HTML elements and attribute values.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    static let style = """
        body{font-family:-apple-system,"Helvetica Neue",Arial,sans-serif;background:#e9ecef;margin:0;padding:24px;\
        color:#1c1c1e}
        .phone{width:390px;margin:0 auto;background:#1c1c1e;border-radius:36px;padding:28px 16px}
        .card{background:#f2f2f7;border-radius:18px;padding:12px 14px}
        .app{font-size:12px;color:#6c6c70;text-transform:uppercase;letter-spacing:.04em;margin-bottom:4px}
        .title{font-weight:600;font-size:15px}.subtitle{font-size:15px}.body{font-size:15px;white-space:pre-wrap}
        .map{margin-top:10px;border-radius:12px;overflow:hidden;background:#f4f1ea}
        .meta{width:390px;margin:16px auto;font-size:13px}.meta code{background:#fff;padding:1px 4px}
        .meta a{word-break:break-all}
        .hint{color:#b45309}.error{color:#b91c1c}
        form{width:390px;margin:16px auto}textarea{width:100%;height:140px;font-family:monospace;font-size:12px}
        """

    /// The page's one style element, exactly as written (its hash is in the Content-Security-Policy).
    static var styleElement: String { "<style>\n\(style)\n</style>" }

    /// The Content-Security-Policy of every preview page: nothing loads (no script at all, no image, no font, no
    /// connection), the one style element is allowed by its hash, forms post only to the service, and no other
    /// site may frame the page.
    public static let contentSecurityPolicy: String = {
        let digest = SHA256.hash(data: Data("\n\(style)\n".utf8))
        let hash = Data(digest).base64EncodedString()
        return "default-src 'none'; style-src 'sha256-\(hash)'; form-action 'self'; frame-ancestors 'none'; "
            + "base-uri 'none'"
    }()

    /// The headers every preview page is served with: the policy above, no MIME sniffing, no framing, no referrer
    /// (the page's links carry a map URL with its key), and no caching.
    public static let securityHeaders: [(name: String, value: String)] = [
        ("Content-Security-Policy", contentSecurityPolicy), ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"), ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"),
    ]

    /// The sign-in page of a service that has an API key: a browser cannot send a bearer header, so the key is
    /// posted once from this form (never in a URL) and kept in an HttpOnly, SameSite=Strict cookie.
    public static func renderSignIn(action: String, error: String? = nil) -> String {
        var html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        html += "<title>Notification preview: sign in</title>\n\(styleElement)</head><body>\n"
        if let error { html += "<p class=\"meta error\" id=\"error\">\(escape(error))</p>\n" }
        html += "<form method=\"post\" action=\"\(escape(action))\" id=\"sign-in\">\n"
        html += "<p>This service needs its API key (ENRICH_API_KEY) to show previews.</p>\n"
        html += "<p><label>API key <input type=\"password\" name=\"key\" autocomplete=\"current-password\" "
        html += "required></label></p>\n<button type=\"submit\">Sign in</button>\n</form>\n</body></html>\n"
        return html
    }

    /// The page for an enrichment, or only the form when `view` is nil.
    public static func render(_ view: View?, context: Context, error: String? = nil) -> String {
        var html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        html += "<title>Notification preview: \(escape(context.deviceId))</title>\n"
        html += "\(styleElement)</head><body>\n"
        if let error { html += "<p class=\"meta error\" id=\"error\">\(escape(error))</p>\n" }
        if let view {
            html += "<div class=\"phone\"><div class=\"card\" id=\"notification\">\n"
            html += "<div class=\"app\" id=\"app\">\(escape(context.appName))</div>\n"
            if let title = view.title {
                html += "<div class=\"title\" id=\"title\">\(escape(title))</div>\n"
            }
            if let subtitle = view.subtitle {
                html += "<div class=\"subtitle\" id=\"subtitle\">\(escape(subtitle))</div>\n"
            }
            html += "<div class=\"body\" id=\"body\">\(escape(view.body))</div>\n"
            if let fix = view.fix {
                html +=
                    "<div class=\"map\" id=\"map\">\(mapSVG(fix: fix, places: view.places, radius: context.radius))</div>\n"
            }
            html += "</div></div>\n<div class=\"meta\" id=\"meta\">\n"
            html +=
                "<p>device <code>\(escape(context.deviceId))</code>: <b id=\"outcome\">\(escape(view.outcome))</b> (\(escape(view.rule)))</p>\n"
            for hint in view.hints { html += "<p class=\"hint\">hint: \(escape(hint))</p>\n" }
            if let url = view.staticMapURL {
                html += "<p>static map: <a id=\"static-map\" href=\"\(escape(url))\">\(escape(url))</a></p>\n"
            }
            html += "</div>\n"
        }
        if let action = context.formAction {
            html += "<form method=\"post\" action=\"\(escape(action))\" id=\"form\">\n"
            html += "<label>device id <input name=\"device_id\" value=\"\(escape(context.deviceId))\"></label>\n"
            html +=
                "<p><label>payload<br><textarea name=\"payload\">\(escape(context.payloadText))</textarea></label></p>\n"
            html += "<button type=\"submit\">Preview</button>\n</form>\n"
        }
        return html + "</body></html>\n"
    }

    /// The map panel: the fix in the middle, POIs placed by their offset (equirectangular, metres), a circle for
    /// the search radius, the distances written next to the POIs.
    static func mapSVG(fix: Coordinate, places: [View.Place], radius: Double?) -> String {
        let width = 358.0
        let height = 200.0
        let lat = fix.latitude
        let lng = fix.longitude
        let pois: [(name: String, dx: Double, dy: Double, distance: Double)] = places.map { place in
            let dy = (place.coordinate.latitude - lat) * 111_195.08
            let dx = (place.coordinate.longitude - lng) * 111_195.08 * cos(lat * .pi / 180)
            return (place.name, dx, dy, place.distance)
        }
        let farthest = max(pois.map { max(abs($0.dx), abs($0.dy)) }.max() ?? 0, radius ?? 0, 50)
        let scale = (height / 2 - 18) / farthest
        let cx = width / 2
        let cy = height / 2
        func f(_ v: Double) -> String { CFormat.fixed(v, decimals: 1) }
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(f(width))\" height=\"\(f(height))\" "
        svg += "viewBox=\"0 0 \(f(width)) \(f(height))\" role=\"img\" aria-label=\"map of the fix and nearby places\">"
        svg += "<rect width=\"100%\" height=\"100%\" fill=\"#f4f1ea\"/>"
        for i in 1..<6 {
            let x = Double(i) * width / 6
            svg += "<line x1=\"\(f(x))\" y1=\"0\" x2=\"\(f(x))\" y2=\"\(f(height))\" stroke=\"#e2ddd2\"/>"
        }
        if let radius {
            svg += "<circle id=\"radius\" cx=\"\(f(cx))\" cy=\"\(f(cy))\" r=\"\(f(radius * scale))\" fill=\"none\" "
            svg += "stroke=\"#2563eb\" stroke-dasharray=\"4 3\"/>"
        }
        for poi in pois {
            let x = cx + poi.dx * scale
            let y = cy - poi.dy * scale
            svg += "<circle class=\"poi\" cx=\"\(f(x))\" cy=\"\(f(y))\" r=\"6\" fill=\"#d62728\"/>"
            let label = "\(poi.name) · \(BodyTemplate.readableDistance(poi.distance))"
            svg += "<text x=\"\(f(x + 9))\" y=\"\(f(y + 4))\" font-size=\"11\" fill=\"#1c1c1e\">\(escape(label))</text>"
        }
        svg += "<circle id=\"fix\" cx=\"\(f(cx))\" cy=\"\(f(cy))\" r=\"8\" fill=\"#2563eb\" stroke=\"#ffffff\" "
        svg += "stroke-width=\"2\"/>"
        return svg + "</svg>"
    }
}
