public import APNsCore
public import Delivery

/// Broadcast channels (iOS 18) the service makes for its apps: Apple's channel management API and broadcasts,
/// through each app's credential, and the channels kept in the database.
public final class BroadcastChannels: Sendable {
    public let store: any ChannelStore
    let clients: [SenderKey: any APNsChannelManaging]
    let settings: DeliverySettings

    init(store: any ChannelStore, clients: [SenderKey: any APNsChannelManaging], settings: DeliverySettings) {
        self.store = store
        self.clients = clients
        self.settings = settings
    }

    /// The client for an app (by bundle id) in an environment: its credential's; nil when none is configured.
    public func client(bundleID: String, environment: APNsEnvironmentName) -> (any APNsChannelManaging)? {
        settings.senderKey(topic: bundleID, environment: environment).flatMap { clients[$0] }
    }

    /// True when credentials are configured.
    public var isConfigured: Bool { !clients.isEmpty }

    /// Closes the connections.
    public func shutdown() async {
        for client in clients.values { try? await client.shutdown() }
    }
}
