public import APNsCore

/// One payload and one set of headers for many device tokens, validated once.
///
/// What every token shares (payload size, headers) is checked when the batch is made: a problem there stops the
/// batch before a connection is opened. Malformed tokens are refused locally with the answer Apple would give,
/// and never sent. The batch then sends the rest through any `APNsBatchSending` and merges both into one result
/// per token, in input order.
public struct APNsBatch: Sendable {
    /// One request per token, in input order; every request shares the same payload storage.
    public private(set) var requests: [APNsRequest]
    /// Tokens refused locally, by request index.
    public private(set) var localRefusals: [Int: APNsValidator.Violation]
    public let pushType: PushType
    /// The `apns-topic` sent (the bundle id with the push type's suffix).
    public let topic: String

    /// Makes the requests; throws the first rule the shared payload and headers break.
    public init(
        payload: [UInt8], tokens: [String], bundle: String, pushType: PushType, priority: APNsPriority? = nil,
        expiration: APNsExpiration? = nil, collapseID: String? = nil, apnsID: String? = nil
    ) throws(APNsValidator.Violation) {
        try self.init(
            payload: payload, tokens: tokens, bundle: bundle, pushType: pushType, priority: priority,
            expiration: expiration, collapseID: collapseID, apnsID: apnsID, checkShared: true)
    }

    private init(
        payload: [UInt8], tokens: [String], bundle: String, pushType: PushType, priority: APNsPriority?,
        expiration: APNsExpiration?, collapseID: String?, apnsID: String?, checkShared: Bool
    ) throws(APNsValidator.Violation) {
        let topic = pushType.topic(forBundle: bundle)
        self.pushType = pushType
        self.topic = topic
        requests = tokens.map { token in
            APNsRequest(
                deviceToken: token, topic: topic, pushType: pushType, priority: priority,
                expiration: expiration, collapseID: collapseID, apnsID: apnsID, payload: payload)
        }
        // The payload and headers are the same for every token: check them once, with a well-formed token.
        let probe = APNsRequest(
            deviceToken: String(repeating: "0", count: 64), topic: topic, pushType: pushType,
            priority: priority, expiration: expiration, collapseID: collapseID, apnsID: apnsID, payload: payload)
        // The headers are shared by every entry (even those with their own payload): checked whatever the payload.
        if let violation = APNsValidator.headerViolation(of: probe) { throw violation }
        if checkShared, let violation = APNsValidator.violation(of: probe) { throw violation }
        var local: [Int: APNsValidator.Violation] = [:]
        for (index, request) in requests.enumerated() where !APNsValidator.isValidDeviceToken(request.deviceToken) {
            local[index] = APNsValidator.violation(of: request)
        }
        localRefusals = local
    }

    /// One request per entry, in input order: an entry with its own payload (a `TOKEN {json}` line) is sent that
    /// payload, the others `defaultPayload`. The default payload and the headers are checked once and throw; an
    /// entry's own payload that breaks a rule refuses that token only.
    public init(
        entries: [(token: String, payload: [UInt8]?)], defaultPayload: [UInt8]?, bundle: String, pushType: PushType,
        priority: APNsPriority? = nil, expiration: APNsExpiration? = nil, collapseID: String? = nil,
        apnsID: String? = nil
    ) throws(APNsValidator.Violation) {
        let shared = defaultPayload ?? []
        try self.init(
            payload: shared, tokens: entries.map(\.token), bundle: bundle, pushType: pushType, priority: priority,
            expiration: expiration, collapseID: collapseID, apnsID: apnsID,
            checkShared: entries.contains { $0.payload == nil })
        var requests = self.requests
        var local = localRefusals
        for (index, entry) in entries.enumerated() {
            guard let own = entry.payload else { continue }
            requests[index].payload = own
            if local[index] == nil, let violation = APNsValidator.violation(of: requests[index]) {
                local[index] = violation
            }
        }
        self.requests = requests
        localRefusals = local
    }

    /// The payload size in bytes, as APNs counts it.
    public var payloadSize: Int { requests.first?.payload.count ?? 0 }

    /// How many requests would go on the wire.
    public var sendableCount: Int { requests.count - localRefusals.count }

    /// What a dry run reports: each token with the local refusal it got, or none; nothing is sent.
    public var dryRunResults: [APNsSendResult] { requests.indices.map(dryRunResult) }

    private func dryRunResult(_ index: Int) -> APNsSendResult {
        APNsSendResult(
            deviceToken: requests[index].deviceToken, status: localRefusals[index]?.status,
            reason: localRefusals[index]?.reason, apnsID: nil, timestamp: nil, attempts: 0,
            transportError: localRefusals[index]?.message)
    }

    /// Sends every well-formed token through `sender`, handing each result (local refusals first) to `onResult` with
    /// its input index as soon as it is final.
    public func stream(
        with sender: some APNsBatchSending, concurrency: Int,
        onResult: @escaping @Sendable (Int, APNsSendResult) -> Void
    ) async {
        guard !localRefusals.isEmpty else {
            // Nothing refused: the requests go as they are (no copy of them, no result made in advance).
            await sender.send(requests, concurrency: concurrency, onResult: onResult)
            return
        }
        for index in localRefusals.keys.sorted() { onResult(index, dryRunResult(index)) }
        let sendable = requests.indices.filter { localRefusals[$0] == nil }
        await sender.send(sendable.map { requests[$0] }, concurrency: concurrency) { position, result in
            onResult(sendable[position], result)
        }
    }

    /// Sends every well-formed token through `sender` and merges the answers with the local refusals: one result
    /// per token, in input order.
    public func send(
        with sender: some APNsBatchSending, concurrency: Int, progress: (@Sendable (Int) -> Void)? = nil
    ) async -> [APNsSendResult] {
        let sendable = requests.indices.filter { localRefusals[$0] == nil }
        let sent = await sender.send(sendable.map { requests[$0] }, concurrency: concurrency, progress: progress)
        var results = dryRunResults
        for (position, index) in sendable.enumerated() {
            results[index] =
                position < sent.count
                ? sent[position]
                : APNsSendResult(
                    deviceToken: requests[index].deviceToken, status: nil, reason: nil, apnsID: nil, timestamp: nil,
                    attempts: 0, transportError: "not sent")
        }
        return results
    }
}
