/// Apple's `reason` strings, with `unknown` for anything Apple adds later.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken, missingTopic
    case payloadEmpty, topicDisallowed
    // Broadcast channels (iOS 18): the channel management API and broadcast pushes.
    case featureNotEnabled, missingChannelId, badChannelId, channelNotRegistered, badRequestParams
    case badRequestPayload, missingPushType, cannotCreateChannelConfig, topicMismatch
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
        (.featureNotEnabled, "FeatureNotEnabled", 400), (.missingChannelId, "MissingChannelId", 400),
        (.badChannelId, "BadChannelId", 400), (.channelNotRegistered, "ChannelNotRegistered", 400),
        (.badRequestParams, "BadRequestParams", 400), (.badRequestPayload, "BadRequestPayload", 400),
        (.missingPushType, "MissingPushType", 400), (.cannotCreateChannelConfig, "CannotCreateChannelConfig", 400),
        (.topicMismatch, "TopicMismatch", 403),
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

    /// Apple's rule: the token is no longer good for this app (and environment): stop sending to it. 410
    /// (Unregistered, ExpiredToken) carries the time it stopped; 400 (BadDeviceToken, DeviceTokenNotForTopic) means
    /// it was never good for the topic and environment it was sent to.
    public var invalidatesToken: Bool {
        switch self {
        case .unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic: true
        default: false
        }
    }

    /// Where the user changes what a hint points at.
    public enum HintContext: Sendable {
        /// `push-sender send`: its flags.
        case sender
        /// A delivery made by the service (`POST /v1/push`, `push-sender push`): registrations and `ENRICH_*`
        /// settings.
        case service
    }

    /// A sentence that helps the user fix the cause, when there is a common one, with `push-sender send`'s flags.
    public var hint: String? { hint(for: .sender) }

    /// A sentence that helps the user fix the cause, naming what the user can change in `context`.
    public func hint(for context: HintContext) -> String? {
        let service = context == .service
        switch self {
        case .badDeviceToken:
            return "the token may belong to the other environment: sandbox (development builds) vs production "
                + "(TestFlight/App Store); "
                + (service
                    ? "register it again with the right \"environment\""
                    : "try --production or --sandbox")
        case .deviceTokenNotForTopic:
            return service
                ? "the token was issued for another app: check the registration's topic (or the push's \"topic\")"
                : "the token was issued for another app: check --topic (the app's bundle id)"
        case .unregistered, .expiredToken:
            return "the app was removed or the token expired: stop sending to this token"
        case .invalidProviderToken:
            return service
                ? "check ENRICH_APNS_KEY_ID and ENRICH_APNS_TEAM_ID against the .p8 key in your Apple developer account"
                : "check --key-id and --team-id against the .p8 key in your Apple developer account"
        case .expiredProviderToken:
            return "the JWT is older than one hour: check the machine's clock"
        case .payloadTooLarge:
            return "shorten the payload: \(PushType.payloadLimitsText)"
        case .badPriority:
            return service
                ? "background pushes need \"priority\": 5, Live Activity pushes 10 or 5"
                : "background pushes need --priority 5, liveactivity pushes 10 or 5"
        case .tooManyRequests:
            return "too many pushes to this device: slow down"
        case .featureNotEnabled:
            return "enable the Broadcast capability for the app's identifier in the Apple developer portal "
                + "(Certificates, IDs & Profiles > Identifiers > Push Notifications)"
        case .channelNotRegistered:
            return "the channel does not exist in this environment (deleted, or created in the other one): "
                + "list the app's channels"
        case .cannotCreateChannelConfig:
            return "the app has 10,000 channels in this environment: delete channels it no longer uses"
        case .topicMismatch:
            return "the key's team or the certificate does not own this bundle id"
        default:
            return nil
        }
    }
}
