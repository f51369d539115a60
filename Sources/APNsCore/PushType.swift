/// The `apns-push-type` values Apple accepts, with the topic suffix each needs.
public enum PushType: String, Sendable, CaseIterable {
    case alert, background, voip, complication, fileprovider, mdm, location, liveactivity, pushtotalk, widgets, controls

    /// The suffix appended to the bundle id for this push type's topic (empty when the bundle id is the topic).
    public var topicSuffix: String {
        switch self {
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .location: ".location-query"
        case .liveactivity: ".push-type.liveactivity"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        case .alert, .background, .mdm: ""
        }
    }

    /// The topic for a bundle id: the suffix is added unless already there.
    public func topic(forBundle bundle: String) -> String {
        guard !topicSuffix.isEmpty, !bundle.hasSuffix(topicSuffix) else { return bundle }
        return bundle + topicSuffix
    }

    /// The only `apns-priority` APNs accepts for this type, when it accepts only one: background pushes must be
    /// sent with 5 (a missing header means 10, which APNs refuses for them). A sender with no priority of its
    /// own sends this one.
    public var requiredPriority: APNsPriority? { self == .background ? .considerate : nil }

    /// The largest payload APNs accepts for this type, in bytes: 4096, or 5120 for voip. The one place the limit
    /// is written (`NotificationPayload.maximumSize` is the alert push's).
    public var maximumPayloadSize: Int { self == .voip ? 5120 : 4096 }

    /// The limits as a phrase for messages: "4096 bytes at most (5120 for voip)".
    public static var payloadLimitsText: String {
        "\(PushType.alert.maximumPayloadSize) bytes at most (\(PushType.voip.maximumPayloadSize) for voip)"
    }
}
