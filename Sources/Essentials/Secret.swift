/// A secret value (an API key, a signing secret, a password, a database URL that carries one) that describes
/// itself redacted, whatever prints it: `String(describing:)`, string interpolation, `debugPrint`, `dump` and
/// `Mirror` all see `<redacted>`, so a struct that holds one can be logged whole without leaking it. The value is
/// read only through `exposed`, at the one place that must send it.
public struct Secret: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable, CustomLeafReflectable
{
    /// The text of the secret. Use it only where it is sent (a header, a query parameter, a connection).
    public let exposed: String

    public init(_ value: String) {
        exposed = value
    }

    public init(stringLiteral value: String) {
        exposed = value
    }

    /// What every description shows.
    public static let redacted = "<redacted>"

    public var description: String { Self.redacted }
    public var debugDescription: String { Self.redacted }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// True when the secret is empty or only whitespace.
    public var isBlank: Bool { exposed.allSatisfy(\.isWhitespace) }
}

extension Optional where Wrapped == Secret {
    /// `set` or `unset`, for summaries.
    public var setOrUnset: String { self == nil ? "unset" : "set" }
}
