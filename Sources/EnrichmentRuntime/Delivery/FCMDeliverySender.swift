import APNsCore
import EnrichmentCore
import Essentials
import FCMClient
import FCMCore
import Foundation
import NIOCore
import Synchronization

/// The delivery pipeline's sender for FCM registrations: it takes the requests the pipeline makes for every
/// registration (the device's enriched APNs payload and its headers), turns each into the device's FCM HTTP v1
/// message (`FCMMessage.fromAPNs`: the alert as `notification`, custom keys as string `data`, the map as
/// `notification.image`, `background` pushes as data-only messages; priority, expiration and collapse id as
/// `android.priority`, `ttl` and `collapse_key`) and sends it with one service account, one attempt each (the
/// outbox retries durably). Answers come back in the shape every sender uses, for `DeliveryPlanner.answerFCM`.
final class FCMDeliverySender: APNsBatchSending {
    let sender: FCMSender

    init(account: FCMServiceAccount, baseURL: String, additionalTrustRootsPEM: String?, requestTimeout: Double) throws {
        var configuration = FCMSenderConfiguration(baseURL: baseURL, additionalTrustRootsPEM: additionalTrustRootsPEM)
        configuration.requestTimeout = .milliseconds(Int64(requestTimeout * 1000))
        configuration.retry = FCMRetryPolicy(maximumAttempts: 1)
        sender = try FCMSender(account: account, configuration: configuration)
    }

    func send(_ requests: [APNsRequest], concurrency: Int, progress: (@Sendable (Int) -> Void)?) async
        -> [APNsSendResult]
    {
        let collected = ResultSlots(count: requests.count)
        await send(requests, concurrency: concurrency) { index, result in
            let done = collected.set(index, result)
            progress?(done)
        }
        return collected.results
    }

    func send(
        _ requests: [APNsRequest], concurrency: Int, onResult: @escaping @Sendable (Int, APNsSendResult) -> Void
    ) async {
        let now = Int64(Date().timeIntervalSince1970)
        var messages: [FCMMessage] = []
        var positions: [Int] = []
        for (index, request) in requests.enumerated() {
            switch Self.message(for: request, now: now) {
            case .success(let message):
                messages.append(message)
                positions.append(index)
            case .failure(let problem):
                // Refused before the wire, as FCM would refuse it: failed, never retried.
                onResult(
                    index,
                    APNsSendResult(
                        deviceToken: request.deviceToken, status: 400, reason: .unknown("INVALID_ARGUMENT"),
                        apnsID: request.apnsID, timestamp: nil, attempts: 0,
                        transportError: "not sent: \(problem.description)"))
            }
        }
        let sentPositions = positions
        await sender.send(messages, concurrency: concurrency) { index, result in
            let position = sentPositions[index]
            onResult(position, Self.result(result, apnsID: requests[position].apnsID))
        }
    }

    func shutdown() async throws { try await sender.shutdown() }

    /// The FCM message of one request.
    static func message(for request: APNsRequest, now: Int64) -> Result<FCMMessage, FCMMessageProblem> {
        if let type = request.pushType, type != .alert, type != .background {
            return .failure(
                FCMMessageProblem(
                    field: "push_type",
                    message: "\(type.rawValue) pushes are iOS-only (FCM has alert and data messages: alert and "
                        + "background pushes reach Android devices)"))
        }
        guard case .object(var members)? = try? JSONParser.parse(request.payload, duplicateKeys: .lastWins) else {
            return .failure(FCMMessageProblem(field: "payload", message: "must be a JSON object"))
        }
        // The enrichment's map is the top-level attachment URL: on Android it is the notification's image.
        let image = members.removeValue(forKey: Enricher.attachmentKey)?.stringValue
        let options = FCMDeliveryOptions(
            dataOnly: request.pushType == .background, apnsPriority: request.priority?.rawValue,
            apnsExpiration: request.expiration?.epochSeconds, collapseID: request.collapseID, image: image)
        do {
            return .success(
                try FCMMessage.fromAPNs(
                    payload: .object(members), token: request.deviceToken, options: options, now: now))
        } catch {
            return .failure(error)
        }
    }

    /// An FCM result in the shape of a send result: FCM's status, its error code (else Google's status) as the
    /// reason, Google's message as the error; a refused service account is 401 UNAUTHENTICATED.
    static func result(_ result: FCMSendResult, apnsID: String?) -> APNsSendResult {
        var status = result.status
        var reason = (result.errorCode?.rawValue ?? result.googleStatus).map(APNsReason.init(rawValue:))
        var message = result.message ?? result.transportError
        if result.status == nil, result.kind == .misconfigured {
            // The token endpoint refused the service account: the credential waits to be fixed.
            status = 401
            reason = .unknown("UNAUTHENTICATED")
            message = result.transportError
        }
        var converted = APNsSendResult(
            deviceToken: result.token, status: status, reason: reason, apnsID: apnsID, timestamp: nil,
            attempts: result.attempts, transportError: status == 200 ? nil : message)
        converted.retryAfter = result.retryAfter
        converted.tokenInvalid = result.kind == .deactivate && result.errorCode != .unregistered
        // A request that got no answer may still have reached FCM (a timeout after the bytes left).
        converted.mayHaveReachedPeer = result.status == nil && result.transportError?.hasPrefix("no answer") == true
        return converted
    }
}

/// Results by position, filled as they come.
private final class ResultSlots: Sendable {
    private let slots: Mutex<([APNsSendResult?], Int)>

    init(count: Int) { slots = Mutex((Array(repeating: nil, count: count), 0)) }

    func set(_ index: Int, _ result: APNsSendResult) -> Int {
        slots.withLock {
            $0.0[index] = result
            $0.1 += 1
            return $0.1
        }
    }

    var results: [APNsSendResult] { slots.withLock { $0.0.compactMap { $0 } } }
}
