import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// Enrich-and-send: `POST /v1/push` and `GET /v1/push/{pushId}`.
struct PushRoutes {
    let state: ServiceState

    /// Above this many devices a push is answered 202 unless it says `"wait": true`.
    static let waitDefaultLimit = 100

    func register(on router: RouteRecorder) {
        router.post("/v1/push", permission: .send) { request, _ in
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            var input = try PushRequest(
                document, now: state.clock.now().timeIntervalSince1970, apps: state.configuration.delivery.apps)
            if let audience = input.audience {
                // Resolved now, against each device's last fix: the push lists who the audience held.
                let members = try await AudienceRoutes.resolve(audience, state: state)
                guard !members.isEmpty else {
                    throw APIError(
                        .unprocessableContent, reason: .audienceEmpty,
                        message: "the audience holds no device now: nothing was sent "
                            + "(POST /v1/audiences/preview shows who it holds)")
                }
                guard members.count <= AudienceRoutes.maximumPushAudience else {
                    throw APIError(
                        .unprocessableContent, reason: .invalidAudience,
                        message: "the audience holds \(members.count) devices; one push reaches at most "
                            + "\(AudienceRoutes.maximumPushAudience): narrow it (a smaller radius, an 'all')",
                        details: ["field": .string("audience")])
                }
                input.push.deviceIds = members.sorted()
                input.wait = input.explicitWait ?? (members.count <= PushRoutes.waitDefaultLimit)
            }
            let receipt = try await state.delivery.submit(input.push)
            let pushId = receipt.push.id
            if input.wait, receipt.deliveries > 0 {
                let timeout = Duration.milliseconds(Int64(state.configuration.delivery.waitTimeout * 1000))
                let done = try await state.delivery.waitUntilDone(pushId: pushId, timeout: timeout)
                guard let report = try await state.delivery.outbox.report(pushId: pushId) else {
                    throw APIError(.internalServerError, reason: .internalError, message: "the push vanished")
                }
                return JSONIO.response(ReportView(report: report, withResults: true), status: done ? .ok : .accepted)
            }
            if input.wait, let report = try await state.delivery.outbox.report(pushId: pushId) {
                return JSONIO.response(ReportView(report: report, withResults: true))
            }
            return JSONIO.response(AcceptedView(receipt: receipt), status: .accepted)
        }
        router.get("/v1/push/:pushId", permission: .readOrSend) { _, context in
            let id = try context.parameters.require("pushId")
            // A push belongs to the app of its devices: another app's push is answered as one that does not exist.
            guard let push = try await state.delivery.outbox.push(id: id), Self.isVisible(push),
                let counts = try await state.delivery.outbox.counts(pushId: id)
            else {
                throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
            }
            // Progress is a count by state (cheap to poll); the per-delivery results come once every one is final.
            if counts[.pending, default: 0] > 0 {
                return JSONIO.response(ProgressView(push: push, counts: counts))
            }
            guard let report = try await state.delivery.outbox.report(pushId: id) else {
                throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
            }
            return JSONIO.response(ReportView(report: report, withResults: report.isDone))
        }
    }

    /// True when the push is the request's app's (its devices are stored under the app, `AppNamespace`).
    static func isVisible(_ push: PushDefinition) -> Bool {
        guard let first = push.deviceIds.first else { return AppScope.current.app == AppNamespace.defaultApp }
        return AppNamespace.app(of: first) == AppScope.current.app
    }

    struct AcceptedView: JSONObjectRepresentable {
        var receipt: DeliveryEngine.Receipt

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("deliveries", receipt.deliveries)
            object.field("devices", receipt.push.deviceIds.count)
            object.field("not_sent", objects: receipt.notSent.map(OutcomeView.init))
            object.field("push_id", receipt.push.id)
            object.field("status_url", "/v1/push/\(receipt.push.id)")
        }
    }

    struct OutcomeView: JSONObjectRepresentable {
        var outcome: DeviceOutcome

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("device_id", DeviceRoutes.shown(outcome.deviceId))
            object.field("outcome", outcome.outcome)
            object.field("rule", outcome.rule)
        }
    }

    /// A push still under way: `{push_id, done: false, counts, deliveries, created_at}`.
    struct ProgressView: JSONObjectRepresentable {
        var push: PushDefinition
        var counts: [DeliveryState: Int]

        func writeJSON(into object: inout JSONObjectWriter) {
            object.object("counts") { c in
                for state in DeliveryState.allCases { c.field(state.rawValue, counts[state] ?? 0) }
            }
            object.field("created_at", push.createdAt)
            object.field("deliveries", counts.values.reduce(0, +))
            object.field("done", false)
            object.field("push_id", push.id)
        }
    }

    /// `{push_id, done, counts, devices?: [{device_id, outcome, rule, deliveries: [...]}]}`.
    struct ReportView: JSONObjectRepresentable {
        var report: PushReport
        var withResults: Bool

        func writeJSON(into object: inout JSONObjectWriter) {
            let counts = report.counts
            object.object("counts") { c in
                for state in DeliveryState.allCases { c.field(state.rawValue, counts[state] ?? 0) }
            }
            object.field("created_at", report.push.createdAt)
            object.field("deliveries", report.deliveries.count)
            if withResults {
                var byDevice: [String: [DeliveryReport]] = [:]
                for delivery in report.deliveries { byDevice[delivery.deviceId, default: []].append(delivery) }
                object.array("devices", report.devices) { device, d in
                    d.field("device_id", DeviceRoutes.shown(device.deviceId))
                    d.field("outcome", device.outcome ?? "pending")
                    d.field("rule", device.rule)
                    d.array("deliveries", byDevice[device.deviceId] ?? []) { delivery, o in
                        o.field("apns_id", delivery.apnsId)
                        o.field("attempts", delivery.attempts)
                        o.field("environment", delivery.environment.rawValue)
                        o.field("error", delivery.error)
                        o.field("reason", delivery.reason)
                        o.field("resent_after_takeover", delivery.resentAfterTakeover)
                        o.field("state", delivery.state.rawValue)
                        o.field("status", delivery.status.map(Int64.init))
                        o.field("timestamp", delivery.apnsTimestamp)
                        o.field("token", delivery.token)
                    }
                }
            }
            object.field("done", report.isDone)
            object.field("push_id", report.push.id)
        }
    }
}

/// The body of `POST /v1/push`, validated field by field.
struct PushRequest {
    static let maximumDevices = 1_000

    var push: PushDefinition
    var wait: Bool
    /// `"wait"` as the request gave it.
    var explicitWait: Bool?
    /// The audience the devices come from (instead of `device_ids`), resolved by the route.
    var audience: JSONValue?

    static let members = [
        "device_ids", "payload", "push_type", "priority", "expiration", "collapse_id", "topic", "enrich", "mode",
        "wait", "audience",
    ]

    init(_ document: JSONValue, now: Double, apps: AppsConfiguration?) throws {
        let body = try BodyMembers(
            document, allowed: Self.members, shape: "{\"device_ids\": [...], \"payload\": {...}, ...}")
        audience = body.value("audience")
        if body.contains("audience"), audience == nil || audience == .null {
            throw body.invalid("audience", "must be an audience object, e.g. {\"near\": {...}} (docs/AUDIENCES.md)")
        }
        if audience != nil, body.contains("device_ids") {
            throw APIError.invalid(
                .invalidRequest, "give device_ids or audience, not both", field: "audience")
        }
        let deviceIds = audience == nil ? try Self.deviceIds(body.value("device_ids")) : []
        let payload: NotificationPayload
        do {
            payload = try NotificationPayload(json: try body.required("payload", "the APNs payload, a JSON object"))
        } catch let error as PayloadError {
            throw APIError.invalid(.invalidPayload, error.description, field: "payload")
        }
        let pushType = try body.choice("push_type", PushType.self) ?? .alert
        var priority: APNsPriority?
        if let raw = try body.integer("priority") {
            guard let known = APNsPriority(rawValue: Int(clamping: raw)) else {
                throw body.invalid(
                    "priority", "must be \(APNsPriority.allowedValues) (Apple's apns-priority values), got \(raw)")
            }
            priority = known
        }
        if priority == nil { priority = pushType.requiredPriority }
        var expiration: APNsExpiration?
        if let raw = try body.integer("expiration") {
            guard let known = APNsExpiration(epochSeconds: raw) else {
                throw body.invalid("expiration", "must be epoch seconds >= 0 (0: deliver once, do not store)")
            }
            expiration = known
        }
        let collapseId = try body.string("collapse_id")
        let topic = try body.string("topic")
        if let topic, let problem = APNsValidator.topicProblem(topic) { throw body.invalid("topic", problem) }
        if let topic { try AppScope.current.requireOwnTopic(topic, field: "topic", apps: apps) }
        if let collapseId, let problem = APNsValidator.collapseIDProblem(collapseId) {
            throw body.invalid("collapse_id", problem)
        }
        let enrich = try body.bool("enrich") ?? true
        let mode = try body.choice("mode", BodyMode.self)
        explicitWait = try body.bool("wait")
        wait = explicitWait ?? (deviceIds.count <= PushRoutes.waitDefaultLimit)

        if enrich, payload.encodedSize > NotificationPayload.maximumSize {
            throw APIError(
                .contentTooLarge, reason: .invalidPush,
                message:
                    "the payload is \(payload.encodedSize) bytes; an enriched push may have at most \(NotificationPayload.maximumSize) (send larger voip payloads with \"enrich\": false)",
                details: ["field": .string("payload")])
        }
        // The payload and headers every delivery shares are checked once, as APNs would (a well-formed probe
        // token; the registration's topic is not known yet).
        let bytes = payload.json.encodedData()
        let probe = APNsRequest(
            deviceToken: String(repeating: "0", count: 64),
            topic: pushType.topic(forBundle: topic ?? "com.example.app"),
            pushType: pushType, priority: priority, expiration: expiration,
            collapseID: collapseId, payload: Array(bytes))
        if let violation = APNsValidator.headerViolation(of: probe) ?? APNsValidator.violation(of: probe) {
            let field: String =
                switch violation.reason {
                case .badTopic, .missingTopic: "topic"
                case .badPriority: "priority"
                case .badCollapseId: "collapse_id"
                case .badExpirationDate: "expiration"
                case .invalidPushType: "push_type"
                default: "payload"
                }
            let status: HTTPResponse.Status = violation.reason == .payloadTooLarge ? .contentTooLarge : .badRequest
            throw APIError(
                status, reason: .invalidPush, message: "\(violation.reason.rawValue): \(violation.message)",
                details: ["field": .string(field)])
        }
        push = PushDefinition(
            id: UUID().uuidString.lowercased(), createdAt: now, payload: payload.json, pushType: pushType,
            priority: priority, expiration: expiration, collapseId: collapseId, topic: topic, enrich: enrich,
            mode: mode, deviceIds: deviceIds)
    }

    static func deviceIds(_ value: JSONValue?) throws -> [String] {
        guard let value else {
            throw APIError.invalid(
                .invalidRequest,
                "device_ids (1 to \(maximumDevices) device ids) or audience (docs/AUDIENCES.md) is required")
        }
        guard case .array(let items) = value else {
            throw APIError.invalid(
                .invalidRequest, "device_ids must be an array of strings, found \(value.typeName)",
                field: "device_ids")
        }
        guard (1...maximumDevices).contains(items.count) else {
            throw APIError.invalid(
                .invalidRequest,
                "device_ids has \(items.count) ids; 1 to \(maximumDevices) are accepted per push (split larger sends)",
                field: "device_ids")
        }
        var seen = Set<String>()
        return try items.enumerated().map { index, item in
            guard let id = item.stringValue else {
                throw APIError.invalid(
                    .invalidRequest, "device_ids[\(index)] must be a string, found \(item.typeName)",
                    field: "device_ids")
            }
            if let problem = DeviceID.problem(with: id) {
                throw APIError.invalid(.invalidDeviceID, "device_ids[\(index)]: \(problem)", field: "device_ids")
            }
            guard seen.insert(id).inserted else {
                throw APIError.invalid(
                    .invalidRequest, "device_ids[\(index)] '\(id)' is listed twice; name each device once",
                    field: "device_ids")
            }
            return AppScope.current.key(id)
        }
    }
}
