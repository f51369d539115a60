/// Apple's `reason` strings, with `unknown` for anything Apple adds later.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken, missingTopic
    case payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIdInToken, badEnvironmentKeyInToken
    case badPath
    case methodNotAllowed
    case expiredToken, unregistered
    case payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests
    case internalServerError
    case serviceUnavailable, shutdown
    case unknown(String)

    private static let known: [(APNsReason, String, Int)] = [
        (.badCollapseId, "BadCollapseId", 400), (.badDeviceToken, "BadDeviceToken", 400),
        (.badExpirationDate, "BadExpirationDate", 400), (.badMessageId, "BadMessageId", 400),
        (.badPriority, "BadPriority", 400), (.badTopic, "BadTopic", 400),
        (.deviceTokenNotForTopic, "DeviceTokenNotForTopic", 400), (.duplicateHeaders, "DuplicateHeaders", 400),
        (.idleTimeout, "IdleTimeout", 400), (.invalidPushType, "InvalidPushType", 400),
        (.missingDeviceToken, "MissingDeviceToken", 400), (.missingTopic, "MissingTopic", 400),
        (.payloadEmpty, "PayloadEmpty", 400), (.topicDisallowed, "TopicDisallowed", 400),
        (.badCertificate, "BadCertificate", 403), (.badCertificateEnvironment, "BadCertificateEnvironment", 403),
        (.expiredProviderToken, "ExpiredProviderToken", 403), (.forbidden, "Forbidden", 403),
        (.invalidProviderToken, "InvalidProviderToken", 403), (.missingProviderToken, "MissingProviderToken", 403),
        (.unrelatedKeyIdInToken, "UnrelatedKeyIdInToken", 403),
        (.badEnvironmentKeyInToken, "BadEnvironmentKeyInToken", 403),
        (.badPath, "BadPath", 404), (.methodNotAllowed, "MethodNotAllowed", 405),
        (.expiredToken, "ExpiredToken", 410), (.unregistered, "Unregistered", 410),
        (.payloadTooLarge, "PayloadTooLarge", 413),
        (.tooManyProviderTokenUpdates, "TooManyProviderTokenUpdates", 429), (.tooManyRequests, "TooManyRequests", 429),
        (.internalServerError, "InternalServerError", 500),
        (.serviceUnavailable, "ServiceUnavailable", 503), (.shutdown, "Shutdown", 503),
    ]

    /// Reads Apple's string; anything else becomes `.unknown` (never dropped).
    public init(rawValue: String) {
        self = Self.known.first { $0.1 == rawValue }?.0 ?? .unknown(rawValue)
    }

    /// Apple's string.
    public var rawValue: String {
        if case .unknown(let raw) = self { return raw }
        return Self.known.first { $0.0 == self }!.1
    }

    /// The HTTP status Apple answers with for this reason (400 for an unknown one).
    public var status: Int {
        if case .unknown = self { return 400 }
        return Self.known.first { $0.0 == self }!.2
    }

    public var description: String { rawValue }

    /// Apple's rule: these will fail the same way again, so they are never retried.
    public var isPermanent: Bool {
        switch self {
        case .badDeviceToken, .unregistered, .expiredToken, .payloadTooLarge: true
        default: false
        }
    }

    /// A sentence that helps the user fix the cause, when there is a common one.
    public var hint: String? {
        switch self {
        case .badDeviceToken:
            "the token may belong to the other environment: sandbox (development builds) vs production (TestFlight/App Store); try --production or --sandbox"
        case .deviceTokenNotForTopic: "the token was issued for another app: check --topic (the app's bundle id)"
        case .unregistered, .expiredToken: "the app was removed or the token expired: stop sending to this token"
        case .invalidProviderToken: "check --key-id and --team-id against the .p8 key in your Apple developer account"
        case .expiredProviderToken: "the JWT is older than one hour: check the machine's clock"
        case .payloadTooLarge: "shorten the payload: 4096 bytes at most (5120 for voip)"
        case .badPriority: "background pushes need --priority 5"
        case .tooManyRequests: "too many pushes to this device: slow down"
        default: nil
        }
    }
}
