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
    public static func isValidDeviceToken(_ token: String) -> Bool {
        (64...200).contains(token.utf8.count) && token.utf8.count % 2 == 0
            && token.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
            }
    }

    /// True for the canonical 8-4-4-4-12 UUID form.
    public static func isValidAPNsID(_ id: String) -> Bool {
        let parts = id.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.map(\.count) == [8, 4, 4, 4, 12] else { return false }
        return parts.allSatisfy {
            $0.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0)
            }
        }
    }

    /// The first rule `request` breaks, in the order Apple checks (path, headers, then payload), or nil.
    public static func violation(of request: APNsRequest) -> Violation? {
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
        if let priority = request.priority {
            guard [1, 5, 10].contains(priority) else {
                return Violation(reason: .badPriority, message: "apns-priority must be 10, 5 or 1, got \(priority)")
            }
            if pushType == .background, priority != 5 {
                return Violation(
                    reason: .badPriority, message: "background pushes must use apns-priority 5, got \(priority)")
            }
        }
        if let expiration = request.expiration, Int64(expiration) == nil || Int64(expiration)! < 0 {
            return Violation(
                reason: .badExpirationDate,
                message: "apns-expiration must be a non-negative integer (epoch seconds, or 0), got '\(expiration)'")
        }
        if let collapseID = request.collapseID, collapseID.utf8.count > 64 {
            return Violation(
                reason: .badCollapseId,
                message: "apns-collapse-id is \(collapseID.utf8.count) bytes; at most 64 are allowed")
        }
        if let apnsID = request.apnsID, !isValidAPNsID(apnsID) {
            return Violation(
                reason: .badMessageId, message: "apns-id must be a UUID such as 123e4567-e89b-12d3-a456-426614174000")
        }
        if request.payload.isEmpty { return Violation(reason: .payloadEmpty, message: "the payload is empty") }
        let limit = (pushType ?? .alert).maximumPayloadSize
        if request.payload.count > limit {
            return Violation(
                reason: .payloadTooLarge,
                message:
                    "the payload is \(request.payload.count) bytes; at most \(limit) are allowed for \((pushType ?? .alert).rawValue) pushes"
            )
        }
        guard case .object? = try? JSONParser.parse(request.payload) else {
            return Violation(reason: .unknown("InvalidPayload"), message: "the payload is not a JSON object")
        }
        return nil
    }
}
