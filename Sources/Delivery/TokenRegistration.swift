public import APNsCore

// Where a device receives pushes and what it carries: its token registrations, the deactivation an APNs answer
// asks for, and its profile (time zone and tags).

/// Where a device receives pushes: one token of one app in one APNs environment.
public struct TokenRegistration: Sendable, Equatable {
    public var deviceId: String
    /// Hex, lower-case.
    public var token: String
    /// The app's bundle id (the push type's suffix is added when sending).
    public var topic: String
    public var environment: APNsEnvironmentName
    /// When the token was last registered, epoch seconds: a 410 older than this does not deactivate it.
    public var registeredAt: Double
    public var active: Bool
    /// When APNs said the token stopped working (epoch seconds), once deactivated.
    public var invalidatedAt: Double?
    /// APNs's reason for the deactivation (`Unregistered`, `BadDeviceToken`, `DeviceTokenNotForTopic`...).
    public var reason: String?

    public init(
        deviceId: String, token: String, topic: String, environment: APNsEnvironmentName, registeredAt: Double,
        active: Bool = true, invalidatedAt: Double? = nil, reason: String? = nil
    ) {
        self.deviceId = deviceId
        self.token = token
        self.topic = topic
        self.environment = environment
        self.registeredAt = registeredAt
        self.active = active
        self.invalidatedAt = invalidatedAt
        self.reason = reason
    }
}

/// A request to deactivate a registration after an APNs answer, applied only when it still holds.
public struct TokenDeactivation: Sendable, Equatable {
    public var deviceId: String
    public var token: String
    /// APNs's reason.
    public var reason: String
    /// When the token stopped working (APNs's 410 timestamp, else when the answer came), epoch seconds.
    public var invalidatedAt: Double
    /// For 410: the registration is left active when it was registered again after this instant.
    public var unlessRegisteredAfter: Double?
    /// For BadDeviceToken and DeviceTokenNotForTopic: only the registration the push was sent for (same topic and
    /// environment) is deactivated; a registration refreshed with other values is left alone.
    public var onlyFor: (topic: String, environment: APNsEnvironmentName)?

    public init(
        deviceId: String, token: String, reason: String, invalidatedAt: Double, unlessRegisteredAfter: Double? = nil,
        onlyFor: (topic: String, environment: APNsEnvironmentName)? = nil
    ) {
        self.deviceId = deviceId
        self.token = token
        self.reason = reason
        self.invalidatedAt = invalidatedAt
        self.unlessRegisteredAfter = unlessRegisteredAfter
        self.onlyFor = onlyFor
    }

    public static func == (a: TokenDeactivation, b: TokenDeactivation) -> Bool {
        a.deviceId == b.deviceId && a.token == b.token && a.reason == b.reason && a.invalidatedAt == b.invalidatedAt
            && a.unlessRegisteredAfter == b.unlessRegisteredAfter && a.onlyFor?.topic == b.onlyFor?.topic
            && a.onlyFor?.environment == b.onlyFor?.environment
    }
}

/// What a device carries for audiences and timing: its IANA zone and its tags, set at registration.
public struct DeviceProfile: Sendable, Equatable {
    public var timeZone: String?
    public var tags: [String]

    public init(timeZone: String? = nil, tags: [String] = []) {
        self.timeZone = timeZone
        self.tags = tags
    }
}
