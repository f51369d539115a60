/// How data of several apps shares one database: a device (and a custom region) of app `courier` is stored under
/// `courier/<id>`, the `default` app's under its bare `<id>`.
///
/// Device ids cannot hold `/` (`DeviceID`), so the two never meet: the same device id in two apps is two devices,
/// and a database written before apps existed is the `default` app's without one row rewritten (docs/APPS.md).
public enum AppNamespace {
    /// The app of the `ENRICH_APNS_*` settings and of every row written before apps existed.
    public static let defaultApp = "default"

    /// An app id (and a credential's or key's name): 1 to 64 lower-case letters, digits and `-`.
    public static func isValidName<S: StringProtocol>(_ text: S) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
    }

    /// For a stored device key, its app's own value when there is one (an app's enricher), else `base`.
    public static func pick<T>(_ key: String, base: T, byApp: [String: T]) -> T {
        byApp.isEmpty ? base : byApp[app(of: key)] ?? base
    }

    /// The stored key of `id` in `app`.
    public static func key(app: String, id: String) -> String {
        app == defaultApp ? id : app + "/" + id
    }

    /// The app and the id a stored key names.
    /// What every stored key of the app begins with (nothing for the default app, whose keys have no `/`).
    public static func prefix(of app: String) -> String { app == defaultApp ? "" : app + "/" }

    public static func split(_ key: String) -> (app: String, id: String) {
        guard let slash = key.firstIndex(of: "/") else { return (defaultApp, key) }
        return (String(key[..<slash]), String(key[key.index(after: slash)...]))
    }

    /// The app a stored key belongs to.
    public static func app(of key: String) -> String {
        guard let slash = key.utf8.firstIndex(of: UInt8(ascii: "/")) else { return defaultApp }
        return String(key[..<slash])
    }

    /// Whether a stored key is of `app`: `app(of: key) == app` without making a string (audiences ask it of every
    /// candidate, over 100,000 for a large one).
    public static func belongs(_ key: String, to app: String) -> Bool {
        let bytes = key.utf8
        if app == defaultApp { return !bytes.contains(UInt8(ascii: "/")) }
        let name = app.utf8
        return bytes.count > name.count && bytes.starts(with: name)
            && bytes[bytes.index(bytes.startIndex, offsetBy: name.count)] == UInt8(ascii: "/")
    }

    /// The id as its app knows it (the stored key without its app).
    public static func id(of key: String) -> String { split(key).id }

    /// The app of a custom region's stored id: `custom_<id>` is the default app's (a region id may hold `/`, an
    /// app id never holds `_`), `<app>/custom_<id>` the app's.
    public static func app(ofRegion key: String) -> String {
        key.hasPrefix("custom_") ? defaultApp : app(of: key)
    }

    /// The app of a stored custom region id (`custom_<id>`: default; `<app>/custom_<id>`: the app), or nil when the
    /// id is not a custom region's (a POI or zone region's, whose ids never start with an app).
    public static func customRegionApp(_ key: String) -> String? {
        if key.hasPrefix("custom_") { return defaultApp }
        guard let slash = key.firstIndex(of: "/"), key[key.index(after: slash)...].hasPrefix("custom_") else {
            return nil
        }
        let app = key[..<slash]
        return isValidName(app) ? String(app) : nil
    }

    /// A custom region's id as its app knows it (`custom_<id>`); other ids unchanged.
    public static func shownRegion(_ key: String) -> String {
        guard let app = customRegionApp(key), app != defaultApp else { return key }
        return String(key.dropFirst(app.count + 1))
    }

    /// A stored id as `app` knows it, or nil when it is another app's (regions and devices alike).
    public static func visible(_ key: String, in app: String) -> String? {
        if app == defaultApp { return key.hasPrefix("custom_") || !key.contains("/") ? key : nil }
        let prefix = app + "/"
        return key.hasPrefix(prefix) ? String(key.dropFirst(prefix.count)) : nil
    }
}
