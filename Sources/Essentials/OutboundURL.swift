import Foundation

/// A URL the service will call (a push's callback, a webhook, an upstream), checked before it is accepted and
/// again before each call.
///
/// HTTP clients take some values on trust: AsyncHTTPClient hands a URL's port to NIO's `SocketAddress`, which
/// traps (the whole process stops) on a port above 65535. So nothing reaches a client unless it passed here: an
/// absolute `http` or `https` URL of at most `maximumBytes`, printable ASCII only (no spaces, no control
/// characters: percent-encode anything else), a host, no user or password, and a port, when one is written,
/// from 1 to 65535.
public enum OutboundURL {
    /// The longest URL accepted, in bytes.
    public static let maximumBytes = 2_048

    /// What is allowed, for error messages.
    public static let allowed =
        "an absolute http(s) URL of at most 2048 bytes: printable ASCII without spaces (percent-encode the rest), "
        + "a host, a port from 1 to 65535 if one is given, no user or password"

    /// Why `text` may not be called, as a phrase (`its port 99999 is not from 1 to 65535`), or nil when it may.
    public static func problem(_ text: String) -> String? {
        guard !text.isEmpty else { return "it is empty" }
        guard text.utf8.count <= maximumBytes else { return "it is longer than \(maximumBytes) bytes" }
        if let bad = text.unicodeScalars.first(where: { $0.value <= 0x20 || $0.value >= 0x7F }) {
            return bad == " "
                ? "it contains a space (percent-encode it as %20)"
                : "it contains the character U+\(String(bad.value, radix: 16, uppercase: true)) "
                    + "(only printable ASCII; percent-encode the rest)"
        }
        // The port as written, read here rather than trusted to the parser: `:99999` and `:0` are refused, and an
        // empty port (`host:/path`) means the scheme's default.
        if let written = writtenPort(text), !written.isEmpty {
            guard written.utf8.count <= 5, written.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let port = Int(written), (1...65_535).contains(port)
            else {
                return "its port \(written.prefix(12)) is not from 1 to 65535"
            }
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            return "it is not an absolute URL"
        }
        guard scheme == "http" || scheme == "https" else { return "its scheme '\(scheme)' is not http or https" }
        guard let host = url.host, !host.isEmpty else { return "it has no host" }
        guard url.user == nil, url.password == nil else { return "it carries a user or password" }
        if let port = url.port, !(1...65_535).contains(port) { return "its port \(port) is not from 1 to 65535" }
        return nil
    }

    /// Whether `text` may be called.
    public static func isValid(_ text: String) -> Bool { problem(text) == nil }

    /// The port written in the authority (`"8443"`, `""` for `host:`), or nil when there is none.
    static func writtenPort(_ text: String) -> Substring? {
        guard let schemeEnd = text.range(of: "://") else { return nil }
        let rest = text[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostAndPort = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority
        if hostAndPort.hasPrefix("[") {
            // An IPv6 literal: the port follows the closing bracket.
            guard let close = hostAndPort.firstIndex(of: "]") else { return nil }
            let after = hostAndPort[hostAndPort.index(after: close)...]
            return after.hasPrefix(":") ? after.dropFirst() : nil
        }
        guard let colon = hostAndPort.lastIndex(of: ":") else { return nil }
        return hostAndPort[hostAndPort.index(after: colon)...]
    }
}

/// A URL refused by `OutboundURL` at the moment it was to be called.
public struct OutboundURLError: Error, CustomStringConvertible, Sendable {
    /// Why it was refused.
    public let problem: String

    /// A refusal for `problem`.
    public init(problem: String) { self.problem = problem }

    public var description: String { "the URL was not called: \(problem)" }
}
