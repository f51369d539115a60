import Delivery
import EnrichmentCore
import EnrichmentStorage
import Essentials
import Foundation
import LocationCore
import Logging

/// What the settings tables read values with, and the defaults their help shows.
extension ServiceConfiguration {
    /// The values a configuration starts with: the defaults shown in help come from here, not from copies.
    static let defaults = ServiceConfiguration()

    static func seconds(_ duration: Duration) -> String {
        let components = duration.components
        return "\(Double(components.seconds) + Double(components.attoseconds) / 1e18)"
    }

    static func trimmed(_ text: String) -> String { text.trimmingCharacters(in: .whitespaces) }

    static func nonEmpty(_ text: String) -> String? {
        let value = trimmed(text)
        return value.isEmpty ? nil : value
    }

    /// A value that can be sent in, and matched against, an HTTP header: visible ASCII and inner spaces only.
    /// A newline or other control character could never arrive in a header, and HTTP strips surrounding spaces.
    static func headerToken(_ text: String) -> String? {
        guard let first = text.utf8.first, let last = text.utf8.last, first != 0x20, last != 0x20 else { return nil }
        return text.utf8.allSatisfy { (0x20...0x7E).contains($0) } ? text : nil
    }

    static func integer(_ range: ClosedRange<Int>) -> @Sendable (String) -> Int? {
        { text in Int(trimmed(text)).flatMap { range.contains($0) ? $0 : nil } }
    }

    static func positive(_ text: String) -> Double? {
        guard let number = Double(trimmed(text)), number.isFinite, number > 0 else { return nil }
        return number
    }

    static func seconds(_ maximum: Double) -> @Sendable (String) -> Double? {
        { text in positive(text).flatMap { $0 <= maximum ? $0 : nil } }
    }

    static func duration(_ seconds: Double) -> Duration { .milliseconds(Int64(seconds * 1000)) }

    static func boolean(_ text: String) -> Bool? { bool(trimmed(text)) }

    static func choice<Value: RawRepresentable<String> & SendableMetatype>(_: Value.Type)
        -> @Sendable (String) -> Value?
    {
        { Value(rawValue: trimmed($0)) }
    }

    static func list(_ text: String) -> [String]? {
        text.split(separator: ",").map { trimmed(String($0)) }.filter { !$0.isEmpty }
    }

    static func httpsURL(_ text: String) -> String? {
        httpURL(text).flatMap { $0.hasPrefix("https://") ? $0 : nil }
    }

    static func frequencyCap(_ text: String) -> FrequencyCap? {
        let parts = trimmed(text).split(separator: "/")
        guard parts.count == 2, let max = Int(parts[0]), (1...1_000).contains(max), let window = Double(parts[1]),
            (60...31_536_000).contains(window)
        else { return nil }
        return FrequencyCap(max: max, window: window)
    }

    static func hostList(_ text: String) -> [String]? {
        let hosts = text.split(separator: ",").map { trimmed(String($0)).lowercased() }
        guard !hosts.isEmpty,
            hosts.allSatisfy({ host in
                !host.isEmpty && host.unicodeScalars.allSatisfy { $0.isASCII && !" /?#@".unicodeScalars.contains($0) }
            })
        else { return nil }
        return hosts
    }

    /// An http(s) URL the service may call: `OutboundURL`'s rules (a port from 1 to 65535, printable ASCII, no
    /// credentials in it), so a mistyped setting stops the start with its name rather than trapping on first use.
    static func httpURL(_ text: String) -> String? {
        let value = trimmed(text)
        return OutboundURL.isValid(value) ? value : nil
    }
}
