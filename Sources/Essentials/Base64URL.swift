public import Foundation

/// URL-safe base64 (RFC 4648 §5), used by Google URL signing and by JWTs.
public enum Base64URL {
    /// Encodes with `-` and `_`; JWTs drop the `=` padding, Google signatures keep it.
    public static func encode(_ data: some DataProtocol, padded: Bool) -> String {
        let text = Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(
            of: "/", with: "_")
        return padded ? text : text.replacingOccurrences(of: "=", with: "")
    }

    /// Decodes, with or without padding; nil when the text is not base64.
    public static func decode(_ text: String) -> Data? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard)
    }
}
