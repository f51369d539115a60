/// FCM registration tokens: opaque URL-safe text (letters, digits, `-`, `_`, `:`), today about 150 to 200
/// characters. Google gives no length or format, so nothing else is assumed: FCM itself judges the rest
/// (`UNREGISTERED`, or INVALID_ARGUMENT "not a valid FCM registration token").
public enum FCMRegistrationToken {
    /// Longest token accepted (far above any FCM has issued; a bound on what is stored).
    public static let maximumLength = 4096

    /// Why `token` cannot be an FCM registration token, or nil.
    public static func problem(_ token: String) -> String? {
        if token.isEmpty { return "an FCM registration token is not empty" }
        if token.utf8.count > maximumLength { return "an FCM registration token is at most \(maximumLength) bytes" }
        let wellFormed = token.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == 0x2D || byte == 0x5F || byte == 0x3A
        }
        return wellFormed ? nil : "an FCM registration token holds only letters, digits, '-', '_' and ':'"
    }

    /// The token shortened for logs and messages, as APNs tokens are: its first 8 characters and its length.
    public static func redacted(_ token: String) -> String {
        "\(token.prefix(8))…(\(token.utf8.count))"
    }
}
