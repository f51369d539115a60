import Essentials
import Foundation

/// Apple's request rules, shared by the mock server (to answer like Apple) and the sender's `--dry-run`.
public enum APNsValidator {
    /// A broken rule: the status and reason Apple would answer, and a sentence for people.
    public struct Violation: Error, Sendable, Equatable {
        public var reason: APNsReason
        public var message: String
        public var status: Int { reason.status }

        public init(reason: APNsReason, message: String) {
            self.reason = reason
            self.message = message
        }
    }

    /// True for an even number of 64 to 200 hexadecimal digits (Apple: do not assume 64).
    public static func isValidDeviceToken(_ token: String) -> Bool { DeviceTokenFormat.isValid(token) }

    /// The violation of an `apns-id` that is not a UUID, or nil.
    public static func apnsIDViolation(_ apnsID: String?) -> Violation? {
        guard let apnsID, !isValidAPNsID(apnsID) else { return nil }
        return Violation(
            reason: .badMessageId, message: "apns-id must be a UUID such as 123e4567-e89b-12d3-a456-426614174000")
    }

    /// True for the canonical 8-4-4-4-12 UUID form (hex digits of either case). One pass over the bytes: it runs
    /// for every push a sender checks.
    public static func isValidAPNsID(_ id: String) -> Bool {
        var id = id
        return id.withUTF8(isUUID)
    }

    private static func isUUID(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == 0x2D else { return false }
            } else {
                guard (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
                else { return false }
            }
        }
        return true
    }

    /// Longest `apns-topic` a sender writes: the app's bundle id with its push type's suffix (a registration's or a
    /// push's `topic` is held to the same bound).
    public static let maximumTopicBytes = 255
    /// Apple: `apns-collapse-id` is at most 64 bytes.
    public static let maximumCollapseIDBytes = 64

    /// Why `topic` cannot be an `apns-topic` (nil when it can): 1 to 255 visible ASCII characters, as a bundle id
    /// (letters, digits, `-`, `.`) with a push type's suffix always is. A space, a control character or a longer
    /// value would make the peer refuse the request's headers, or close the connection every other push shares.
    public static func topicProblem(_ topic: String) -> String? {
        let count = topic.utf8.count
        guard count > 0 else { return "must not be empty (it is the app's bundle id)" }
        guard count <= maximumTopicBytes else {
            return
                "is \(count) bytes; at most \(maximumTopicBytes) are allowed (the app's bundle id and its push type's suffix)"
        }
        guard topic.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            return
                "must be the app's bundle id: visible ASCII characters only (no space, control or non-ASCII character)"
        }
        return nil
    }

    /// Why `collapseID` cannot be an `apns-collapse-id` (nil when it can): 1 to 64 bytes (Apple's limit), with no
    /// control character and no space at either end (neither can travel in an HTTP/2 header value).
    public static func collapseIDProblem(_ collapseID: String) -> String? {
        let count = collapseID.utf8.count
        guard count > 0 else { return "must not be empty (leave it out instead)" }
        guard count <= maximumCollapseIDBytes else {
            return "is \(count) bytes; at most \(maximumCollapseIDBytes) are allowed"
        }
        guard !collapseID.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            return "must not contain a control character (newline, tab, NUL...)"
        }
        guard collapseID.utf8.first != 0x20, collapseID.utf8.last != 0x20 else {
            return "must not start or end with a space"
        }
        return nil
    }

    /// Why `expiration` cannot be an `apns-expiration` (nil when it can): epoch seconds, digits only, 0 to
    /// 9,223,372,036,854,775,807.
    public static func expirationProblem(_ expiration: String) -> String? {
        guard !expiration.isEmpty, expiration.utf8.allSatisfy({ (0x30...0x39).contains($0) }), Int64(expiration) != nil
        else {
            return
                "must be epoch seconds as digits only (0: deliver once, do not store), got \(expiration.utf8.count) characters"
        }
        return nil
    }

    /// The first rule a header value of `request` breaks, or nil. A sender checks this before a request is written
    /// to a connection, so no value can make the peer refuse the headers or close a connection other pushes share:
    /// Apple's header rules, plus the shape every HTTP/2 header value must have.
    public static func headerViolation(of request: APNsWireRequest) -> Violation? {
        if let violation = shapeViolation(of: request) { return violation }
        // Apple's header rules (topic present and matching the push type, push type, priority, apns-id), judged
        // on a probe with a well-formed token and payload so that only the headers decide.
        var probe = request
        probe.deviceToken = String(repeating: "0", count: 64)
        probe.payload = Array("{}".utf8)
        if probe.topic == nil {
            // No topic is legal with certificate authentication (APNs takes the certificate's).
            probe.topic = (request.pushType.flatMap(PushType.init(rawValue:)) ?? .alert).topic(
                forBundle: "com.example.app")
        }
        return violation(of: probe)
    }

    /// Everything a sender checks before writing one whole request: the header values' shape
    /// (`headerViolation`'s own checks), then every rule Apple applies (`violation`), each once. `payloadIsObject`:
    /// the caller wrote the payload from a JSON object.
    public static func sendViolation(of request: APNsWireRequest, payloadIsObject: Bool = false) -> Violation? {
        shapeViolation(of: request) ?? violation(of: request, payloadIsObject: payloadIsObject)
    }

    /// The header values a peer would refuse at the HTTP/2 level, or that would close a shared connection.
    static func shapeViolation(of request: APNsWireRequest) -> Violation? {
        if let topic = request.topic, let problem = topicProblem(topic) {
            // An empty topic is a missing one, as Apple answers it.
            return Violation(reason: topic.isEmpty ? .missingTopic : .badTopic, message: "apns-topic \(problem)")
        }
        if let collapseID = request.collapseID, let problem = collapseIDProblem(collapseID) {
            return Violation(reason: .badCollapseId, message: "apns-collapse-id \(problem)")
        }
        if let expiration = request.expiration, let problem = expirationProblem(expiration) {
            return Violation(reason: .badExpirationDate, message: "apns-expiration \(problem)")
        }
        return nil
    }

    /// True when `token` can travel in the request path (`/3/device/<token>`) without breaking it: 1 to 1,024
    /// ASCII letters and digits. Whether it is a token Apple issued is for Apple to answer (BadDeviceToken).
    public static func isPathSafe(deviceToken token: String) -> Bool {
        guard (1...1_024).contains(token.utf8.count) else { return false }
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
        // Over the bytes in place when the string has them contiguous (it nearly always does).
        return token.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isAlphanumeric) }
            ?? token.utf8.allSatisfy(isAlphanumeric)
    }

    /// What a sender answers, without writing to any connection, for a request that must not be sent: a header
    /// value that breaks a rule (`headerViolation`), or a token that cannot be a path.
    public static func localRefusal(of request: APNsWireRequest) -> Violation? {
        headerViolation(of: request) ?? localRefusal(pathOf: request)
    }

    /// The refusal of a token that cannot travel in the request path, or nil.
    public static func localRefusal(pathOf request: APNsWireRequest) -> Violation? {
        guard isPathSafe(deviceToken: request.deviceToken) else {
            return request.deviceToken.isEmpty
                ? Violation(reason: .missingDeviceToken, message: "no device token")
                : Violation(
                    reason: .badDeviceToken,
                    message:
                        "the device token must be hexadecimal, an even number of 64 to 200 digits; got \(request.deviceToken.utf8.count) bytes with characters that cannot travel in the request path"
                )
        }
        return nil
    }

    /// The first rule `request` breaks, in the order Apple checks (path, headers, then payload), or nil.
    /// `payloadIsObject`: the caller wrote the payload from a JSON object, so it is not parsed again.
    public static func violation(of request: APNsWireRequest, payloadIsObject: Bool = false) -> Violation? {
        if request.deviceToken.isEmpty {
            return Violation(reason: .missingDeviceToken, message: "no device token in the path")
        }
        guard isValidDeviceToken(request.deviceToken) else {
            return Violation(
                reason: .badDeviceToken,
                message:
                    "device token must be hexadecimal, an even number of 64 to 200 digits (Apple does not promise 64), got \(request.deviceToken.count) characters"
            )
        }
        guard let topic = request.topic, !topic.isEmpty else {
            return Violation(
                reason: .missingTopic, message: "apns-topic is required with token authentication (the app's bundle id)"
            )
        }
        var pushType: PushType?
        if let raw = request.pushType {
            guard let known = PushType(rawValue: raw) else {
                return Violation(
                    reason: .invalidPushType,
                    message:
                        "apns-push-type '\(raw)' is not one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            pushType = known
        }
        if let pushType, !pushType.topicSuffix.isEmpty, !topic.hasSuffix(pushType.topicSuffix) {
            return Violation(
                reason: .badTopic,
                message: "apns-push-type \(pushType.rawValue) needs a topic ending in \(pushType.topicSuffix)")
        }
        if let raw = request.priority {
            guard let priority = APNsPriority(header: raw) else {
                return Violation(
                    reason: .badPriority,
                    message: "apns-priority must be \(APNsPriority.allowedValues), got '\(raw.prefix(16))'")
            }
            if let pushType, let required = pushType.requiredPriority, priority != required {
                return Violation(
                    reason: .badPriority,
                    message: "\(pushType.rawValue) pushes must use apns-priority \(required), got \(priority)")
            }
            // ActivityKit's push page: a Live Activity push is sent with priority 10 or 5, never 1.
            if pushType == .liveactivity, priority == .low {
                return Violation(
                    reason: .badPriority, message: "liveactivity pushes must use apns-priority 10 or 5, got 1")
            }
        }
        if let expiration = request.expiration, APNsExpiration(header: expiration) == nil {
            return Violation(
                reason: .badExpirationDate,
                message: "apns-expiration must be a non-negative integer (epoch seconds, or 0), got '\(expiration)'")
        }
        if let collapseID = request.collapseID, collapseID.utf8.count > maximumCollapseIDBytes {
            return Violation(
                reason: .badCollapseId,
                message:
                    "apns-collapse-id is \(collapseID.utf8.count) bytes; at most \(maximumCollapseIDBytes) are allowed")
        }
        if let violation = apnsIDViolation(request.apnsID) { return violation }
        if request.payload.isEmpty { return Violation(reason: .payloadEmpty, message: "the payload is empty") }
        let limit = (pushType ?? .alert).maximumPayloadSize
        if request.payload.count > limit {
            return Violation(
                reason: .payloadTooLarge,
                message:
                    "the payload is \(request.payload.count) bytes; at most \(limit) are allowed for \((pushType ?? .alert).rawValue) pushes"
            )
        }
        guard
            payloadIsObject
                || {
                    if case .object? = try? JSONParser.parse(request.payload, duplicateKeys: .lastWins) {
                        true
                    } else {
                        false
                    }
                }()
        else {
            return Violation(reason: .unknown("InvalidPayload"), message: "the payload is not a JSON object")
        }
        return nil
    }

    /// `headerViolation(of:)` for a typed request.
    public static func headerViolation(of request: APNsRequest) -> Violation? { headerViolation(of: request.wire) }

    /// `localRefusal(of:)` for a typed request.
    public static func localRefusal(of request: APNsRequest) -> Violation? { localRefusal(of: request.wire) }

    /// `localRefusal(pathOf:)` for a typed request.
    public static func localRefusal(pathOf request: APNsRequest) -> Violation? {
        localRefusal(pathOf: request.wire)
    }

    /// `violation(of:)` for a typed request.
    public static func violation(of request: APNsRequest, payloadIsObject: Bool = false) -> Violation? {
        violation(of: request.wire, payloadIsObject: payloadIsObject)
    }
}
