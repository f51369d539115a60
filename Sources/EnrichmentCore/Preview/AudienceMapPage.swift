import Foundation

/// What an audience draws on a map: its circles and polygons (`near`, `in_region`, `zoi`) and the POIs of a
/// `visited`, each marked when it takes devices away (inside a `not`).
public struct AudienceShape: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case circle(center: Coordinate, radius: Double)
        case polygon([Coordinate])
        case point(Coordinate)
    }

    public var kind: Kind
    public var excluded: Bool
}

extension Audience {
    /// The areas and places the audience names, at most `limit` of them (a `visited` by type may name thousands of
    /// POIs).
    public func shapes(limit: Int = 500) -> [AudienceShape] {
        var found: [AudienceShape] = []
        func walk(_ audience: Audience, excluded: Bool) {
            guard found.count < limit else { return }
            switch audience {
            case .near(let center, let radius, _, _):
                found.append(AudienceShape(kind: .circle(center: center, radius: radius), excluded: excluded))
            case .region(_, let area, _), .zoi(_, let area):
                switch area {
                case .circle(let center, let radius):
                    found.append(AudienceShape(kind: .circle(center: center, radius: radius), excluded: excluded))
                case .polygon(let vertices):
                    found.append(AudienceShape(kind: .polygon(vertices), excluded: excluded))
                }
            case .visited(let pois, _, _):
                for poi in pois.prefix(limit - found.count) {
                    found.append(AudienceShape(kind: .point(poi), excluded: excluded))
                }
            case .tags:
                break
            case .all(let parts), .any(let parts):
                for part in parts { walk(part, excluded: excluded) }
            case .not(let inner):
                walk(inner, excluded: !excluded)
            }
        }
        walk(self, excluded: false)
        return found
    }
}

/// `/preview/audience`: who an audience holds now, counted and drawn (each member's last fix as a dot over the
/// audience's circles, polygons and places), with a form to edit it. Plain HTML and SVG, no script, served under
/// the preview pages' security headers.
public enum AudienceMapPage {
    public struct Result: Sendable {
        public var count: Int
        public var milliseconds: Double
        /// The last fixes of the members drawn (at most `PreviewPage.maximumDots`).
        public var members: [Coordinate]
        public var sample: [String]
        public var shapes: [AudienceShape]

        public init(count: Int, milliseconds: Double, members: [Coordinate], sample: [String], shapes: [AudienceShape])
        {
            self.count = count
            self.milliseconds = milliseconds
            self.members = members
            self.sample = sample
            self.shapes = shapes
        }
    }

    /// Most member dots drawn.
    public static let maximumDots = 5_000

    public static let exampleAudience = #"{"near": {"poi_id": "paris-eiffel", "radius_m": 2000}}"#

    public static func render(audienceText: String, app: String, result: Result?, error: String? = nil) -> String {
        let escape = PreviewPage.escape
        var html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        html += "<title>Audience preview</title>\n\(PreviewPage.styleElement)</head><body>\n"
        if let error { html += "<p class=\"meta error\" id=\"error\">\(escape(error))</p>\n" }
        if let result {
            html += "<div class=\"meta\" id=\"summary\"><p>app <code>\(escape(app))</code>: "
            html += "<b id=\"count\">\(result.count)</b> device\(result.count == 1 ? "" : "s") now "
            html += "(\(CFormat.fixed(result.milliseconds, decimals: 1)) ms)"
            if result.members.count < result.count {
                html += "; \(result.members.count) drawn"
            }
            html += "</p></div>\n"
            html += "<div class=\"map\" id=\"audience-map\">\(svg(result))</div>\n"
            if !result.sample.isEmpty {
                html += "<div class=\"meta\"><p>sample: "
                html += result.sample.map { "<code>\(escape($0))</code>" }.joined(separator: " ")
                html += "</p></div>\n"
            }
        }
        html += "<form method=\"post\" action=\"/preview/audience\" id=\"form\">\n"
        html += "<p><label>audience (JSON, as in POST /v1/audiences/preview)<br>"
        html += "<textarea name=\"audience\">\(escape(audienceText))</textarea></label></p>\n"
        html += "<button type=\"submit\">Show</button>\n</form>\n"
        return html + "</body></html>\n"
    }

    /// The map: an equirectangular view around every shape and member, north up; shapes that take devices away
    /// dashed grey, the others blue; members as dots.
    static func svg(_ result: Result) -> String {
        let width = 390.0
        let height = 300.0
        var points: [Coordinate] = result.members
        for shape in result.shapes {
            switch shape.kind {
            case .circle(let center, let radius):
                let dLat = radius / 111_195.08
                let dLng = dLat / max(cos(center.latitude * .pi / 180), 0.01)
                points.append(Coordinate(latitude: center.latitude - dLat, longitude: center.longitude - dLng))
                points.append(Coordinate(latitude: center.latitude + dLat, longitude: center.longitude + dLng))
            case .polygon(let vertices): points += vertices
            case .point(let point): points.append(point)
            }
        }
        func f(_ v: Double) -> String { CFormat.fixed(v, decimals: 1) }
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(f(width))\" height=\"\(f(height))\" "
        svg += "viewBox=\"0 0 \(f(width)) \(f(height))\" role=\"img\" aria-label=\"map of the audience\">"
        svg += "<rect width=\"100%\" height=\"100%\" fill=\"#f4f1ea\"/>"
        guard let south = points.map(\.latitude).min(), let north = points.map(\.latitude).max(),
            let west = points.map(\.longitude).min(), let east = points.map(\.longitude).max()
        else { return svg + "</svg>" }
        let middle = (south + north) / 2
        let xScale = cos(middle * .pi / 180)
        let spanX = max((east - west) * xScale, 1e-6)
        let spanY = max(north - south, 1e-6)
        let scale = min((width - 24) / spanX, (height - 24) / spanY)
        let originX = (width - spanX * scale) / 2
        let originY = (height - spanY * scale) / 2
        func x(_ c: Coordinate) -> Double { originX + (c.longitude - west) * xScale * scale }
        func y(_ c: Coordinate) -> Double { originY + (north - c.latitude) * scale }
        for i in 1..<6 {
            let gx = Double(i) * width / 6
            svg += "<line x1=\"\(f(gx))\" y1=\"0\" x2=\"\(f(gx))\" y2=\"\(f(height))\" stroke=\"#e2ddd2\"/>"
        }
        for shape in result.shapes {
            let stroke = shape.excluded ? "#6b7280\" stroke-dasharray=\"4 3" : "#2563eb"
            let fill = shape.excluded ? "none" : "#2563eb\" fill-opacity=\"0.08"
            switch shape.kind {
            case .circle(let center, let radius):
                let ry = radius / 111_195.08 * scale
                svg += "<ellipse class=\"area\" cx=\"\(f(x(center)))\" cy=\"\(f(y(center)))\" rx=\"\(f(ry))\" "
                svg += "ry=\"\(f(ry))\" fill=\"\(fill)\" stroke=\"\(stroke)\"/>"
            case .polygon(let vertices):
                let list = vertices.map { "\(f(x($0))),\(f(y($0)))" }.joined(separator: " ")
                svg += "<polygon class=\"area\" points=\"\(list)\" fill=\"\(fill)\" stroke=\"\(stroke)\"/>"
            case .point(let point):
                svg += "<rect class=\"place\" x=\"\(f(x(point) - 3))\" y=\"\(f(y(point) - 3))\" width=\"6\" "
                svg += "height=\"6\" fill=\"#d62728\"/>"
            }
        }
        for member in result.members {
            svg += "<circle class=\"member\" cx=\"\(f(x(member)))\" cy=\"\(f(y(member)))\" r=\"2.5\" "
            svg += "fill=\"#111827\"/>"
        }
        return svg + "</svg>"
    }
}
