/// How the notification body is written: the SDK's exact strings, or a human-readable template.
public enum BodyMode: String, Sendable, CaseIterable {
    /// Code-exact reproduction of the Woosmap Geofencing SDK's NotificationService strings and rules.
    case woosmap
    /// Human-readable body from a template; also accepts the legacy top-level payload shape.
    case `default`
}
