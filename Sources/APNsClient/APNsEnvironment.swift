import APNsCore

/// Where pushes go.
public enum APNsEnvironment: Sendable, Equatable {
    /// `https://api.sandbox.push.apple.com` (development builds).
    case sandbox
    /// `https://api.push.apple.com` (TestFlight and App Store builds).
    case production
    /// Any compatible host, such as the mock: `https://127.0.0.1:2197`.
    case custom(String)

    /// The base URL (scheme, host and port).
    public var baseURL: String {
        switch self {
        case .sandbox: APNsEnvironmentName.sandbox.baseURL
        case .production: APNsEnvironmentName.production.baseURL
        case .custom(let url): url.hasSuffix("/") ? String(url.dropLast()) : url
        }
    }
}
