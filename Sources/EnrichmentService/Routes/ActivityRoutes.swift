import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// Live Activities: a device's ActivityKit tokens, and starting, updating and ending its activities by push.
///
/// - `PUT|DELETE /v1/devices/{deviceId}/activity-types/{activityType}/push-to-start-token`
/// - `POST /v1/devices/{deviceId}/activity-types/{activityType}/start`
/// - `PUT|DELETE /v1/devices/{deviceId}/activities/{activityId}` (the activity's update token)
/// - `POST /v1/devices/{deviceId}/activities/{activityId}/update` and `/end`
/// - `GET /v1/devices/{deviceId}/activities`
///
/// The service writes the `aps` (event, timestamp, content-state...) and sends with `apns-push-type:
/// liveactivity` to `<bundle id>.push-type.liveactivity`, through the outbox like any push (`GET /v1/push/{id}`).
struct ActivityRoutes {
    let state: ServiceState

    /// An activity type or id in a path: what ActivityKit gives (a Swift type name, a UUID), 1 to 128 visible
    /// ASCII characters.
    static func pathName(_ context: ServiceContext, _ parameter: String, what: String) throws -> String {
        let raw = try context.parameters.require(parameter)
        guard let name = raw.removingPercentEncoding, !name.isEmpty, name.utf8.count <= 128,
            name.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else {
            throw APIError.invalid(
                .invalidRequest, "\(parameter) must be \(what): 1 to 128 visible ASCII characters", field: parameter)
        }
        return name
    }

    struct RegistrationView: JSONObjectRepresentable {
        var registration: ActivityRegistration

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("activity_id", registration.activityId)
            object.field("activity_type", registration.activityType)
            object.field("device_id", DeviceRoutes.shown(registration.deviceId))
            object.field("ended_at", registration.endedAt)
            object.field("environment", registration.environment.rawValue)
            object.field("frequent_pushes_enabled", json: registration.frequentPushesEnabled.map(JSONValue.bool))
            object.field("invalid_reason", registration.invalidReason)
            object.field("invalidated_at", registration.invalidatedAt)
            object.field("kind", registration.kind.rawValue)
            object.field("last_timestamp", registration.lastTimestamp)
            object.field("registered_at", registration.registeredAt)
            object.field("token", registration.token)
            object.field("topic", registration.topic)
        }
    }

    struct ListView: JSONObjectRepresentable {
        var deviceId: String
        var registrations: [ActivityRegistration]

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field(
                "activities", objects: registrations.filter { $0.kind == .update }.map(RegistrationView.init))
            object.field("device_id", DeviceRoutes.shown(deviceId))
            object.field(
                "push_to_start_tokens",
                objects: registrations.filter { $0.kind == .pushToStart }.map(RegistrationView.init))
        }
    }

    /// A registration body: `{"token", "topic", "environment", "frequent_pushes_enabled"?}` (and
    /// `"activity_type"` for an activity's update token).
    static func registration(
        _ document: JSONValue, deviceId: String, kind: ActivityTokenKind, key: String, now: Double,
        apps: AppsConfiguration?
    ) throws -> ActivityRegistration {
        var allowed = ["token", "topic", "environment", "frequent_pushes_enabled"]
        if kind == .update { allowed.append("activity_type") }
        let body = try BodyMembers(
            document, allowed: allowed,
            shape: "{\"token\", \"topic\", \"environment\", \"frequent_pushes_enabled\"?"
                + (kind == .update ? ", \"activity_type\"}" : "}"))
        let rawToken = try body.requiredString("token", "the ActivityKit push token, hex")
        let token: String
        switch DeviceTokenFormat.normalized(rawToken) {
        case .success(let normalized): token = normalized
        case .failure(let problem): throw body.invalid("token", problem.message, reason: .invalidToken)
        }
        let topic = try body.requiredString("topic", "the app's bundle id")
        if let problem = APNsValidator.topicProblem(topic) { throw body.invalid("topic", problem) }
        if topic.hasSuffix(PushType.liveactivity.topicSuffix) {
            throw body.invalid(
                "topic", "is the app's bundle id, without '\(PushType.liveactivity.topicSuffix)' (the service adds it)")
        }
        try AppScope.current.requireOwnTopic(topic, field: "topic", apps: apps)
        guard let environment = try body.apnsEnvironment("environment") else {
            throw body.invalid(
                "environment", "is required: sandbox (development builds) or production (TestFlight and App Store)")
        }
        var activityType = key
        if kind == .update {
            activityType = try body.requiredString(
                "activity_type", "the ActivityAttributes type, e.g. DeliveryAttributes")
            if activityType.isEmpty || activityType.utf8.count > 128 {
                throw body.invalid("activity_type", "must be 1 to 128 characters")
            }
        }
        return ActivityRegistration(
            deviceId: deviceId, kind: kind, activityType: activityType, activityId: kind == .update ? key : nil,
            token: token, topic: topic, environment: environment,
            frequentPushesEnabled: try body.bool("frequent_pushes_enabled"), registeredAt: now)
    }

    func register(on router: RouteRecorder) {
        let devices = router.group("/v1/devices")
        devices.put(":deviceId/activity-types/:activityType/push-to-start-token") { request, context in
            let id = try DeviceRoutes.deviceId(context)
            let type = try Self.pathName(context, "activityType", what: "an ActivityAttributes type name")
            return try await save(request, deviceId: id, kind: .pushToStart, key: type)
        }
        devices.delete(":deviceId/activity-types/:activityType/push-to-start-token") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            let type = try Self.pathName(context, "activityType", what: "an ActivityAttributes type name")
            return try await remove(deviceId: id, kind: .pushToStart, key: type)
        }
        devices.put(":deviceId/activities/:activityId") { request, context in
            let id = try DeviceRoutes.deviceId(context)
            let activity = try Self.pathName(context, "activityId", what: "ActivityKit's activity id")
            return try await save(request, deviceId: id, kind: .update, key: activity)
        }
        devices.delete(":deviceId/activities/:activityId") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            let activity = try Self.pathName(context, "activityId", what: "ActivityKit's activity id")
            return try await remove(deviceId: id, kind: .update, key: activity)
        }
        devices.get(":deviceId/activities") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            return JSONIO.response(
                ListView(deviceId: id, registrations: try await state.activities.registrations(deviceId: id)))
        }
        devices.post(":deviceId/activity-types/:activityType/start", permission: .send) { request, context in
            let id = try DeviceRoutes.deviceId(context)
            let type = try Self.pathName(context, "activityType", what: "an ActivityAttributes type name")
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            return try await send(document, event: .start, deviceId: id, kind: .pushToStart, key: type)
        }
        for event in [LiveActivityEvent.update, .end] {
            devices.post(":deviceId/activities/:activityId/\(event.rawValue)", permission: .send) { request, context in
                let id = try DeviceRoutes.deviceId(context)
                let activity = try Self.pathName(context, "activityId", what: "ActivityKit's activity id")
                let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
                return try await send(document, event: event, deviceId: id, kind: .update, key: activity)
            }
        }
    }

    private func save(_ request: Request, deviceId: String, kind: ActivityTokenKind, key: String) async throws
        -> Response
    {
        let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
        let registration = try Self.registration(
            document, deviceId: deviceId, kind: kind, key: key, now: state.clock.now().timeIntervalSince1970,
            apps: state.configuration.delivery.apps)
        let created = try await state.activities.register(registration)
        let stored = try await state.activities.registration(deviceId: deviceId, kind: kind, key: key) ?? registration
        return JSONIO.response(RegistrationView(registration: stored), status: created ? .created : .ok)
    }

    private func remove(deviceId: String, kind: ActivityTokenKind, key: String) async throws -> Response {
        guard try await state.activities.remove(deviceId: deviceId, kind: kind, key: key) else {
            throw Self.notFound(deviceId: deviceId, kind: kind, key: key)
        }
        return JSONIO.response(
            bytes: JSONWriter.bytes(
                .object([
                    "deleted": .bool(true), "device_id": .string(DeviceRoutes.shown(deviceId)), "key": .string(key),
                ])))
    }

    /// The staleness rule for a Live Activity push or a broadcast: 422 `stale_activity_update` outside the window,
    /// 400 naming `timestamp` when it is further ahead of now than the future bound (ENRICH_MAX_FUTURE_SKEW, or
    /// the window's size when that is off). The phone orders an activity's updates by it, and the service refuses
    /// any push not newer than the last one sent, so one timestamp years ahead would lock the activity (and its
    /// type's starts) until then.
    static func requireFresh(_ timestamp: Int64, now: Date, configuration: ServiceConfiguration) throws {
        let bound = configuration.maxFutureSkew ?? configuration.stalenessWindow
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        if timestamp > nowSeconds + bound {
            throw APIError.invalid(
                .invalidRequest,
                "timestamp \(timestamp) is \(timestamp - nowSeconds) s ahead of the service's clock; at most \(bound) s "
                    + "ahead is allowed (ENRICH_MAX_FUTURE_SKEW, else the staleness window's size): the phone "
                    + "orders updates by it, so a later one would lock the activity. Leave it out to send now",
                field: "timestamp")
        }
        let verdict = configuration.enrichmentSettings.staleness.evaluate(
            TimestampReading(timestamp: timestamp, source: .apsInteger, problem: nil), now: now)
        guard verdict.state != .fresh else { return }
        throw APIError(
            .unprocessableContent, reason: .staleActivityUpdate,
            message:
                "timestamp \(timestamp) is \(verdict.rule == .futureSkew ? "too far in the future" : "older than the \(configuration.stalenessWindow) s window") (\(verdict.detail ?? "")); leave it out to send now",
            details: ["field": .string("timestamp")])
    }

    static func notFound(deviceId: String, kind: ActivityTokenKind, key: String) -> APIError {
        switch kind {
        case .pushToStart:
            APIError(
                .notFound, reason: .activityNotFound,
                message:
                    "device '\(DeviceRoutes.shown(deviceId))' has no push-to-start token for '\(key)': the app registers it from "
                    + "Activity<\(key)>.pushToStartTokenUpdates (iOS 17.2 and later)")
        case .update:
            APIError(
                .notFound, reason: .activityNotFound,
                message:
                    "device '\(DeviceRoutes.shown(deviceId))' has no activity '\(key)': the app registers each activity's token from "
                    + "activity.pushTokenUpdates")
        }
    }

    /// Builds, checks, records and commits one Live Activity push.
    private func send(
        _ document: JSONValue, event: LiveActivityEvent, deviceId: String, kind: ActivityTokenKind, key: String
    ) async throws -> Response {
        let now = state.clock.now()
        var input = try LiveActivityRequest(document, event: event)
        if event == .start { input.attributesType = key }
        guard state.configuration.delivery.hasAPNsCredentials else {
            throw APIError(
                .serviceUnavailable, reason: .deliveryNotConfigured,
                message:
                    "no APNs credentials are configured (Live Activities are iOS-only; an FCM service account does not "
                    + "send them): set ENRICH_APNS_KEY_FILE, ENRICH_APNS_KEY_ID and ENRICH_APNS_TEAM_ID, or give the "
                    + "app a .p8 key credential in ENRICH_APPS_FILE"
            )
        }
        guard let registration = try await state.activities.registration(deviceId: deviceId, kind: kind, key: key)
        else { throw Self.notFound(deviceId: deviceId, kind: kind, key: key) }
        if let invalidatedAt = registration.invalidatedAt {
            throw APIError(
                .conflict, reason: .activityTokenInvalid,
                message:
                    "APNs said this token no longer works (\(registration.invalidReason ?? "invalid") at "
                    + "\(Int64(invalidatedAt))): the app registers the new token it gets from ActivityKit "
                    + "(PUT the registration again)")
        }
        guard state.configuration.delivery.usesTokenAuthentication(topic: registration.topic) else {
            let app = state.configuration.delivery.apps?.app(forTopic: registration.topic)
            throw APIError(
                .conflict, reason: .liveActivityNeedsTokenAuth,
                message:
                    "Live Activity pushes need token authentication: APNs takes them only with a .p8 key, and "
                    + (app.map { app in
                        app.credential.map {
                            "app '\(app.id)' sends with the certificate '\($0)' (give it a .p8 key credential in ENRICH_APPS_FILE)"
                        } ?? "app '\(app.id)' has no APNs credential (give it a .p8 key credential in ENRICH_APPS_FILE)"
                    }
                        ?? "the service has a certificate (set ENRICH_APNS_KEY_FILE, ENRICH_APNS_KEY_ID, ENRICH_APNS_TEAM_ID)")
            )
        }
        // Without a timestamp of its own a push is stamped now; within the same second as the activity's last
        // push, the next second, so that updates sent in quick succession keep their order on the phone.
        var timestamp = input.timestamp ?? Int64(now.timeIntervalSince1970.rounded(.down))
        if input.timestamp == nil, let last = registration.lastTimestamp, last >= timestamp, last - timestamp < 5 {
            timestamp = last + 1
        }
        try Self.requireFresh(timestamp, now: now, configuration: state.configuration)
        var contentState = input.contentState
        var enrichment: LiveActivityContent.Filled?
        if input.enrich {
            let filled = try await LiveActivityContent.fill(
                contentState, deviceId: deviceId, enricher: state.enricher(forDevice: deviceId), at: now)
            contentState = filled.contentState
            enrichment = filled
        }
        let payload = input.payload(event: event, timestamp: timestamp, contentState: contentState)
        let checkedEvent: LiveActivityEvent
        do throws(LiveActivityPayload.Problem) {
            checkedEvent = try LiveActivityPayload.check(payload)
        } catch {
            throw APIError.invalid(.invalidPush, error.description, field: error.field)
        }
        precondition(checkedEvent == event)
        let bytes = payload.encodedData()
        if bytes.count > PushType.liveactivity.maximumPayloadSize {
            throw APIError(
                .contentTooLarge, reason: .payloadTooLarge,
                message:
                    "the Live Activity payload is \(bytes.count) bytes; APNs takes \(PushType.liveactivity.maximumPayloadSize) at most",
                details: ["field": .string("content_state")])
        }
        // The order of an activity's updates: only a newer timestamp goes out, and nothing after its end.
        switch try await state.activities.recordSend(
            deviceId: deviceId, kind: kind, key: key, timestamp: timestamp, ends: event == .end,
            now: now.timeIntervalSince1970)
        {
        case .recorded: break
        case .unknown: throw Self.notFound(deviceId: deviceId, kind: kind, key: key)
        case .ended(let at):
            throw APIError(
                .conflict, reason: .activityEnded,
                message: "activity '\(key)' ended at \(Int64(at)): the phone ignores pushes to an ended activity")
        case .notNewer(let last):
            throw APIError(
                .conflict, reason: .activityUpdateNotNewer,
                message:
                    "timestamp \(timestamp) is not newer than \(last), already sent for this "
                    + (kind == .update ? "activity" : "activity type")
                    + ": the phone keeps only the newest update and would drop this one",
                details: ["field": .string("timestamp"), "last_timestamp": .int(last)])
        }
        let push = PushDefinition(
            id: RandomUUID.lowercased(), createdAt: now.timeIntervalSince1970, payload: payload,
            pushType: .liveactivity, priority: input.priority, expiration: input.expiration, collapseId: nil,
            topic: nil, enrich: false, mode: nil, deviceIds: [deviceId])
        let delivery = NewDelivery(
            deviceId: deviceId, token: registration.token, topic: registration.topic,
            environment: registration.environment, apnsId: RandomUUID.lowercased())
        let receipt: DeliveryEngine.Receipt
        do {
            receipt = try await state.delivery.submit(push, deliveries: [delivery])
        } catch {
            // Not committed: the activity's order and end are as before, so the same push can be sent again.
            try? await state.activities.revertSend(
                deviceId: deviceId, kind: kind, key: key, timestamp: timestamp, previous: registration.lastTimestamp)
            throw error
        }
        return JSONIO.response(
            SentView(
                receipt: receipt, event: event, timestamp: timestamp, priority: input.priority,
                registration: registration, enrichment: enrichment, payload: payload,
                dismissalCapped: input.dismissalCapped(timestamp: timestamp)),
            status: .accepted)
    }

    struct SentView: JSONObjectRepresentable {
        var receipt: DeliveryEngine.Receipt
        var event: LiveActivityEvent
        var timestamp: Int64
        var priority: APNsPriority
        var registration: ActivityRegistration
        var enrichment: LiveActivityContent.Filled?
        var payload: JSONValue
        var dismissalCapped: Bool

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("activity_id", registration.activityId)
            object.field("activity_type", registration.activityType)
            if let enrichment {
                object.object("enrichment") { e in
                    e.field("fix_age_s", enrichment.fixAgeSeconds)
                    e.field("nearest_poi", enrichment.nearestPOI)
                    e.field("outcome", enrichment.outcome)
                    e.field("rule", enrichment.rule)
                }
            }
            object.field("event", event.rawValue)
            object.field("frequent_pushes_enabled", json: registration.frequentPushesEnabled.map(JSONValue.bool))
            object.field("payload", json: payload)
            object.field("priority", Int64(priority.rawValue))
            object.field("push_id", receipt.push.id)
            object.field("status_url", "/v1/push/\(receipt.push.id)")
            object.field("timestamp", timestamp)
            var warnings: [String] = []
            if priority == .immediately {
                warnings.append(
                    "priority 10 counts against Apple's hourly budget of Live Activity pushes (the system may "
                        + "throttle past it); priority 5 does not")
            }
            if priority == .immediately, registration.frequentPushesEnabled == false {
                warnings.append(
                    "the person turned frequent updates off for this app (frequent_pushes_enabled false): keep "
                        + "priority-10 pushes rare")
            }
            if dismissalCapped {
                warnings.append(
                    "dismissal_date is more than 4 hours after the end: the system removes an ended activity after 4 "
                        + "hours at most")
            }
            object.field("warnings", strings: warnings)
        }
    }
}
