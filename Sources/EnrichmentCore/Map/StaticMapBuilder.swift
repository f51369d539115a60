public import Crypto
public import Essentials
public import Foundation

/// Builds Google Static Maps URLs the way the SDK does, with the current base by default and optional signing.
public struct StaticMapBuilder: Sendable {
    /// Which URL form to write.
    public enum Style: String, Sendable, CaseIterable {
        /// `https://maps.googleapis.com/maps/api/staticmap`, no `sensor` parameter.
        case current
        /// The SDK's `http://maps.google.com/maps/api/staticmap` with `sensor=true`.
        case legacy

        /// The default base URL for this style.
        public var defaultBaseURL: String {
            switch self {
            case .current: "https://maps.googleapis.com/maps/api/staticmap"
            case .legacy: "http://maps.google.com/maps/api/staticmap"
            }
        }
    }

    public let style: Style
    public let baseURL: String
    private let baseHasQuery: Bool
    /// Google Maps API key (`key=`), when configured. Never logged.
    public var apiKey: Secret?
    /// URL-signing secret (URL-safe base64), decoded; its bytes are never shown, even by `dump` or `Mirror`.
    private var signingSecret: SigningKey?

    /// The decoded signing secret, describing itself redacted.
    struct SigningKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        let bytes: Data
        var description: String { Secret.redacted }
        var debugDescription: String { Secret.redacted }
        var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    /// Creates a builder; `signingSecret` is Google's URL-safe base64 secret.
    public init(
        style: Style = .current, baseURL: String? = nil, apiKey: Secret? = nil,
        signingSecret: Secret? = nil
    ) throws(MapConfigurationError) {
        self.style = style
        self.baseURL = baseURL ?? style.defaultBaseURL
        baseHasQuery = self.baseURL.contains("?")
        guard let url = URL(string: self.baseURL), url.scheme != nil, url.host != nil else {
            throw .invalidBaseURL(self.baseURL)
        }
        self.apiKey = apiKey.flatMap { $0.exposed.isEmpty ? nil : $0 }
        if let signingSecret, !signingSecret.exposed.isEmpty {
            guard let data = Self.decodeURLSafeBase64(signingSecret.exposed) else { throw .invalidSigningSecret }
            self.signingSecret = SigningKey(bytes: data)
        }
    }

    /// The map URL for the user's position, with a second marker for the POI when there is one.
    public func url(user: Coordinate, poi: Coordinate?) -> String {
        var query: String
        if let poi {
            query =
                "markers=color:red%7C\(Self.userMarker(user))&markers=color:blue%7C\(Self.poiMarker(poi))&zoom=14&size=400x400"
        } else {
            query = "markers=color:blue%7C\(Self.userMarker(user))&zoom=15&size=400x400"
        }
        if style == .legacy { query += "&sensor=true" }
        if let apiKey { query += "&key=\(Self.percentEncode(apiKey.exposed))" }
        let unsigned = baseURL + (baseHasQuery ? "&" : "?") + query
        guard let signingSecret else { return unsigned }
        return unsigned + "&signature=" + Self.signature(for: unsigned, key: SymmetricKey(data: signingSecret.bytes))
    }

    /// The user's position as the SDK writes it: printf `%f` each (`48.858370`, `-0.000000`), the same strings as the
    /// body's `myLatitude` / `myLongitude`.
    public static func userMarker(_ coordinate: Coordinate) -> String {
        CFormat.fixed(coordinate.latitude) + "," + CFormat.fixed(coordinate.longitude)
    }

    /// A POI's position as the SDK writes it: Swift's `Double` description (`51.5088`, `-0.14408`, `1e-05`).
    public static func poiMarker(_ coordinate: Coordinate) -> String {
        "\(coordinate.latitude),\(coordinate.longitude)"
    }

    static func percentEncode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    /// Google's URL signature: HMAC-SHA1 over path and query, URL-safe base64.
    public static func signature(for url: String, key: SymmetricKey) -> String {
        var resource = url
        if let schemeEnd = url.range(of: "://"), let pathStart = url[schemeEnd.upperBound...].firstIndex(of: "/") {
            resource = String(url[pathStart...])
        }
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(resource.utf8), using: key)
        return Base64URL.encode(Data(mac), padded: true)
    }

    /// Decodes URL-safe base64 (with or without padding).
    public static func decodeURLSafeBase64(_ text: String) -> Data? { Base64URL.decode(text) }
}

/// Why the map configuration is unusable.
public enum MapConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidBaseURL(String)
    case invalidSigningSecret

    public var description: String {
        switch self {
        case .invalidBaseURL(let url):
            "map base URL '\(url)' is not an absolute URL (expected e.g. https://maps.googleapis.com/maps/api/staticmap)"
        case .invalidSigningSecret:
            "map signing secret is not URL-safe base64 (copy it exactly from the Google Cloud console)"
        }
    }
}
