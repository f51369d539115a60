import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// Broadcast channels (iOS 18) kept per app: `POST /v1/channels`, `GET /v1/channels`, `GET|DELETE
/// /v1/channels/{channelId}` and `POST /v1/channels/{channelId}/broadcast`. Each goes to Apple with the credential
/// of the app whose bundle id it names (docs/APPS.md), and the service keeps which channels exist.
struct ChannelRoutes {
    let state: ServiceState

    struct ChannelView: JSONObjectRepresentable {
        var channel: BroadcastChannel
        var requestID: String?

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("apns_request_id", requestID)
            object.field("bundle_id", channel.bundleID)
            object.field("channel_id", channel.channelID)
            object.field("created_at", channel.createdAt)
            object.field("environment", channel.environment.rawValue)
            object.field(
                "storage_policy", APNsMessageStoragePolicy(rawValue: channel.storagePolicy)?.name ?? "unknown")
        }
    }

    struct ListView: JSONObjectRepresentable {
        var channels: [BroadcastChannel]
        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("channels", objects: channels.map { ChannelView(channel: $0) })
        }
    }

    /// A bundle id usable in Apple's paths: letters, digits, `-` and `.`, without a push type's suffix.
    static func bundleProblem(_ bundle: String) -> String? {
        let allowed = bundle.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == 0x2D || byte == 0x2E
        }
        guard !bundle.isEmpty, bundle.utf8.count <= 155, allowed else {
            return "must be the app's bundle id (letters, digits, '-' and '.')"
        }
        if let suffix = PushType.allCases.map(\.topicSuffix).first(where: { !$0.isEmpty && bundle.hasSuffix($0) }) {
            return "is the app's bundle id without '\(suffix)'"
        }
        return nil
    }

    /// The answer to a refusal or a failure of APNs.
    static func apnsError(_ error: any Error) -> APIError {
        guard let refusal = error as? APNsBroadcastError else {
            var answer = APIError(
                .serviceUnavailable, reason: .apnsUnavailable, message: "APNs could not be reached: \(error)")
            answer.headers[.retryAfter] = "5"
            return answer
        }
        var details: [String: JSONValue] = [
            "apns_reason": .string(refusal.reason.rawValue), "apns_status": .int(Int64(refusal.status)),
        ]
        if let requestID = refusal.requestID { details["apns_request_id"] = .string(requestID) }
        // Throttled, or the service's own credential refused: not the caller's request; try again later.
        let credential =
            refusal.reason == .invalidProviderToken || refusal.reason == .expiredProviderToken
            || refusal.reason == .tooManyProviderTokenUpdates
        if refusal.status >= 500 || refusal.status == 429 || credential {
            var answer = APIError(
                .serviceUnavailable, reason: .apnsUnavailable, message: refusal.description, details: details)
            answer.headers[.retryAfter] = "5"
            return answer
        }
        let status: HTTPResponse.Status =
            refusal.reason == .cannotCreateChannelConfig ? .conflict : .unprocessableContent
        return APIError(status, reason: .apnsRefused, message: refusal.description, details: details)
    }

    func client(bundleID: String, environment: APNsEnvironmentName) throws -> any APNsChannelManaging {
        guard state.channels.isConfigured else {
            throw APIError(
                .serviceUnavailable, reason: .deliveryNotConfigured,
                message:
                    "no APNs credentials are configured: set ENRICH_APNS_KEY_FILE, or give an app of ENRICH_APPS_FILE "
                    + "a credential (a .p8 key or a certificate)")
        }
        guard let client = state.channels.client(bundleID: bundleID, environment: environment) else {
            throw APIError(
                .unprocessableContent, reason: .apnsRefused,
                message: state.configuration.delivery.noCredentialMessage(topic: bundleID),
                details: ["field": .string("bundle_id")])
        }
        return client
    }

    func stored(_ context: ServiceContext) async throws -> BroadcastChannel {
        let id = try context.parameters.require("channelId").removingPercentEncoding ?? ""
        // Another app's channel is answered as one that does not exist.
        guard let channel = try await state.channels.store.channel(id: id), isVisible(channel) else {
            throw APIError(
                .notFound, reason: .channelNotFound,
                message: "no channel '\(id)' was made through this service (GET /v1/channels lists them)")
        }
        return channel
    }

    /// True when the channel is the request's app's: its bundle id is the app's (for `default`: no app's).
    func isVisible(_ channel: BroadcastChannel) -> Bool {
        let owner = state.configuration.delivery.apps?.app(forTopic: channel.bundleID)?.id ?? AppNamespace.defaultApp
        return owner == AppScope.current.app
    }

    func register(on router: RouteRecorder) {
        router.post("/v1/channels") { request, _ in
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            let body = try BodyMembers(
                document, allowed: ["bundle_id", "environment", "storage_policy"],
                shape: "{\"bundle_id\", \"environment\", \"storage_policy\": \"none\"|\"most-recent\"}")
            let bundle = try body.requiredString("bundle_id", "the app's bundle id")
            if let problem = Self.bundleProblem(bundle) { throw body.invalid("bundle_id", problem) }
            try AppScope.current.requireOwnTopic(bundle, field: "bundle_id", apps: state.configuration.delivery.apps)
            guard let environment = try body.apnsEnvironment("environment") else {
                throw body.invalid("environment", "is required: sandbox or production (channels live in one)")
            }
            let policyName = try body.requiredString("storage_policy", "none or most-recent")
            guard let policy = APNsMessageStoragePolicy(name: policyName) else {
                throw body.invalid(
                    "storage_policy",
                    "must be none (only devices online now; broadcasts with expiration 0) or most-recent (the last "
                        + "message kept up to 8 hours)")
            }
            let apns = try client(bundleID: bundle, environment: environment)
            let created: (channelID: String, requestID: String?)
            do { created = try await apns.createChannel(bundleID: bundle, policy: policy, requestID: nil) } catch {
                throw Self.apnsError(error)
            }
            let channel = BroadcastChannel(
                channelID: created.channelID, bundleID: bundle, environment: environment,
                storagePolicy: policy.rawValue, createdAt: state.clock.now().timeIntervalSince1970)
            do {
                try await state.channels.store.add(channel)
            } catch {
                // Not kept: delete it at Apple too, so that no channel exists there that the service cannot list.
                try? await apns.deleteChannel(bundleID: bundle, channelID: created.channelID, requestID: nil)
                throw error
            }
            return JSONIO.response(ChannelView(channel: channel, requestID: created.requestID), status: .created)
        }
        router.get("/v1/channels") { request, _ in
            let bundle = request.uri.queryParameters.get("bundle_id")
            var environment: APNsEnvironmentName?
            if let raw = request.uri.queryParameters.get("environment") {
                guard let known = APNsEnvironmentName(rawValue: raw), known.isAPNs else {
                    throw APIError.invalid(
                        .invalidRequest, "environment must be sandbox or production", field: "environment")
                }
                environment = known
            }
            return JSONIO.response(
                ListView(
                    channels: try await state.channels.store.channels(bundleID: bundle, environment: environment)
                        .filter(isVisible)))
        }
        router.get("/v1/channels/:channelId") { _, context in
            JSONIO.response(ChannelView(channel: try await stored(context)))
        }
        router.delete("/v1/channels/:channelId") { _, context in
            let channel = try await stored(context)
            let apns = try client(bundleID: channel.bundleID, environment: channel.environment)
            do {
                try await apns.deleteChannel(bundleID: channel.bundleID, channelID: channel.channelID, requestID: nil)
            } catch let refusal as APNsBroadcastError where refusal.reason == .channelNotRegistered {
                // Gone at Apple already (deleted elsewhere, or the capability was turned off): forget it too.
            } catch {
                throw Self.apnsError(error)
            }
            _ = try await state.channels.store.remove(id: channel.channelID)
            return JSONIO.response(
                bytes: JSONWriter.bytes(.object(["deleted": .bool(true), "channel_id": .string(channel.channelID)])))
        }
        router.post("/v1/channels/:channelId/broadcast", permission: .send) { request, context in
            let channel = try await stored(context)
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            let input = try BroadcastRequest(document, channel: channel)
            let now = state.clock.now()
            let timestamp = input.timestamp ?? Int64(now.timeIntervalSince1970.rounded(.down))
            try ActivityRoutes.requireFresh(timestamp, now: now, configuration: state.configuration)
            let payload = input.activity.payload(
                event: input.event, timestamp: timestamp, contentState: input.activity.contentState)
            if let problem = LiveActivityPayload.broadcastProblem(payload) {
                throw APIError.invalid(.invalidPush, problem, field: "content_state")
            }
            let bytes = Array(payload.encodedData())
            guard bytes.count <= 5120 else {
                throw APIError(
                    .contentTooLarge, reason: .payloadTooLarge,
                    message: "the broadcast payload is \(bytes.count) bytes; APNs takes 5120 at most",
                    details: ["field": .string("content_state")])
            }
            let apns = try client(bundleID: channel.bundleID, environment: channel.environment)
            let answer: APNsBroadcastAnswer
            do {
                answer = try await apns.broadcast(
                    bundleID: channel.bundleID, channelID: channel.channelID, payload: bytes,
                    priority: input.priority, expiration: input.expiration, requestID: nil)
            } catch {
                throw Self.apnsError(error)
            }
            var members: [String: JSONValue] = [
                "accepted": .bool(true), "channel_id": .string(channel.channelID), "payload": payload,
                "note": .string("accepted by APNs, not yet delivered: APNs sends it to the devices listening"),
            ]
            if let requestID = answer.requestID { members["apns_request_id"] = .string(requestID) }
            if let uniqueID = answer.uniqueID { members["apns_unique_id"] = .string(uniqueID) }
            return JSONIO.response(bytes: JSONWriter.bytes(.object(members)))
        }
    }
}

/// The body of a broadcast: a Live Activity update or end (`"event"`, default update), with `priority` 10, 5 or
/// 1 and `expiration` (0 for a channel that stores no message).
struct BroadcastRequest {
    var event: LiveActivityEvent
    var activity: LiveActivityRequest
    var priority: APNsPriority
    var expiration: Int64
    var timestamp: Int64? { activity.timestamp }

    init(_ document: JSONValue, channel: BroadcastChannel) throws {
        guard case .object(var members) = document else {
            throw APIError.invalid(.invalidRequest, "the body must be a JSON object {\"content_state\": {...}}")
        }
        if members["enrich"] != nil {
            throw APIError.invalid(
                .unknownField,
                "'enrich' is not a member of a broadcast: one payload goes to every listening device, so it cannot "
                    + "carry one device's location",
                field: "enrich")
        }
        let eventValue = members.removeValue(forKey: "event")
        switch eventValue {
        case nil, .null?: event = .update
        case .string("update")?: event = .update
        case .string("end")?: event = .end
        default:
            throw APIError.invalid(
                .invalidRequest, "event must be update or end (a broadcast cannot start an activity)", field: "event")
        }
        let rawPriority = members.removeValue(forKey: "priority")
        let rawExpiration = members.removeValue(forKey: "expiration")
        activity = try LiveActivityRequest(.object(members), event: event)
        switch rawPriority {
        case nil, .null?: priority = .immediately
        case .int(10)?: priority = .immediately
        case .int(5)?: priority = .considerate
        case .int(1)?: priority = .low
        default: throw APIError.invalid(.invalidRequest, "priority must be 10, 5 or 1", field: "priority")
        }
        switch rawExpiration {
        case nil, .null?: expiration = 0
        case .int(let value)? where value >= 0: expiration = value
        default: throw APIError.invalid(.invalidRequest, "expiration must be epoch seconds or 0", field: "expiration")
        }
        if channel.storagePolicy == 0, expiration != 0 {
            throw APIError.invalid(
                .invalidRequest,
                "expiration must be 0: channel \(channel.channelID) stores no message (APNs refuses any other value)",
                field: "expiration")
        }
    }
}
