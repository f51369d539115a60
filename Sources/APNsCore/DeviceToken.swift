/// Which APNs service a token belongs to: each registration records it, and each is one host.
public enum APNsEnvironmentName: String, Sendable, CaseIterable {
    /// `api.sandbox.push.apple.com`: development builds.
    case sandbox
    /// `api.push.apple.com`: TestFlight and App Store builds.
    case production
    /// Not APNs: a Firebase Cloud Messaging registration token (an Android device). Registrations and deliveries
    /// say where their token is valid in one column, so an FCM one is stored with this value; the APNs rules
    /// (token format, topics, environments) do not apply to it.
    case fcm

    /// The two APNs environments (what an APNs token may be registered for).
    public static let apns: [APNsEnvironmentName] = [.sandbox, .production]

    /// True for `sandbox` and `production`.
    public var isAPNs: Bool { self != .fcm }

    /// Apple's base URL for this environment.
    public var baseURL: String {
        switch self {
        case .sandbox: "https://api.sandbox.push.apple.com"
        case .production: "https://api.push.apple.com"
        case .fcm: "https://fcm.googleapis.com"
        }
    }
}

/// APNs device tokens: the one rule for their shape (hex, an even number of 64 to 200 digits: Apple says not to
/// assume 64), how a token is stored (lower-case) and how it is shown in logs and messages (shortened).
public enum DeviceTokenFormat {
    /// Apple says not to assume a length: tokens are hex, 32 to 100 bytes.
    public static let digitRange = 64...200

    /// True for an even number of 64 to 200 hexadecimal digits (either case).
    public static func isValid(_ token: String) -> Bool {
        let count = token.utf8.count
        guard digitRange.contains(count), count % 2 == 0 else { return false }
        return token.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isHexDigit) }
            ?? token.utf8.allSatisfy(isHexDigit)
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }

    /// The token as stored (lower-case), or a sentence saying what is wrong and what is allowed.
    public static func normalized(_ token: String) -> Result<String, DeviceTokenProblem> {
        let count = token.utf8.count
        guard token.utf8.allSatisfy(isHexDigit) else {
            return .failure(
                DeviceTokenProblem(
                    message: "device token may contain only hexadecimal digits (0-9, a-f); "
                        + "send the APNs token as hex, e.g. from deviceToken.map { String(format: \"%02x\", $0) }"))
        }
        guard digitRange.contains(count), count % 2 == 0 else {
            return .failure(
                DeviceTokenProblem(
                    message: "device token has \(count) hex digits; an even number from \(digitRange.lowerBound) "
                        + "to \(digitRange.upperBound) is accepted (Apple does not promise 64)"))
        }
        return .success(token.lowercased())
    }

    /// A token shortened for logs and messages: its first 8 digits and its length, never the whole token.
    public static func redacted(_ token: String) -> String {
        "\(token.prefix(8))…(\(token.utf8.count))"
    }
}

/// Why a device token is refused.
public struct DeviceTokenProblem: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
