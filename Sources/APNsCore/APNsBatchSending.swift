/// Something that sends pushes in batches: the HTTP/2 client, or a stand-in in tests.
///
/// The batch logic (`APNsBatch`: validation once, local refusals, dry runs, merged results) works against this
/// protocol, so it is tested without a network and reused by every caller (the CLI, the service's delivery).
public protocol APNsBatchSending: Sendable {
    /// Sends every request with at most `concurrency` in flight; results come back in input order, one per
    /// request. `progress` is called with the number finished so far.
    func send(_ requests: [APNsRequest], concurrency: Int, progress: (@Sendable (Int) -> Void)?) async
        -> [APNsSendResult]

    /// Sends every request with at most `concurrency` in flight, handing each result to `onResult` with its index
    /// as soon as it is final (in any order), so a large run need not hold its results.
    func send(
        _ requests: [APNsRequest], concurrency: Int, onResult: @escaping @Sendable (Int, APNsSendResult) -> Void
    ) async

    /// Connections opened so far (a gauge for operators); a sender without connections answers 0.
    func connectionsOpened() async -> Int

    /// Closes connections; call once when done.
    func shutdown() async throws
}

extension APNsBatchSending {
    public func connectionsOpened() async -> Int { 0 }

    /// Streams through the collecting `send` (for senders that have nothing better).
    public func send(
        _ requests: [APNsRequest], concurrency: Int, onResult: @escaping @Sendable (Int, APNsSendResult) -> Void
    ) async {
        for (index, result) in await send(requests, concurrency: concurrency, progress: nil).enumerated() {
            onResult(index, result)
        }
    }
}

/// The outcome for one device token.
public struct APNsSendResult: Sendable, Equatable {
    public var deviceToken: String
    /// The final HTTP status, or nil when no answer came (transport failure).
    public var status: Int?
    public var reason: APNsReason?
    public var apnsID: String?
    /// For 410: milliseconds since the epoch when the token stopped being valid.
    public var timestamp: Int64?
    public var attempts: Int
    /// The transport failure, when there was no answer.
    public var transportError: String?
    /// With a transport failure: true when the request was on a connection that died (or timed out) before the
    /// answer, so the peer may have received it; false when it never left (no connection, refused unprocessed).
    public var mayHaveReachedPeer = false
    /// Seconds the peer asked to wait before the next attempt (`Retry-After`; FCM sends it, APNs does not).
    public var retryAfter: Double?
    /// The peer said the token itself is not valid (FCM's INVALID_ARGUMENT about `message.token`), as opposed to
    /// the message: its registration is deactivated. APNs says this with its reasons instead.
    public var tokenInvalid = false

    public init(
        deviceToken: String, status: Int?, reason: APNsReason?, apnsID: String?, timestamp: Int64?, attempts: Int,
        transportError: String?
    ) {
        self.deviceToken = deviceToken
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.timestamp = timestamp
        self.attempts = attempts
        self.transportError = transportError
    }

    public var succeeded: Bool { status == 200 }

    /// A sentence that helps with this failure, when one applies.
    public var hint: String? { reason?.hint }
}
