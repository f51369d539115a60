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
                document, now: state.clock.now().timeIntervalSince1970, apps: state.configuration.delivery.apps,
                callbackHosts: state.configuration.delivery.callbackHosts)
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
            // The app's defaults: its zone for devices without one, its frequency cap.
            // (The default app's come from ENRICH_DEFAULT_TIME_ZONE and ENRICH_FREQUENCY_CAP.)
            let delivery = state.configuration.delivery
            let app = delivery.apps?.app(id: AppScope.current.app)
            let isDefault = AppScope.current.app == AppNamespace.defaultApp
            let appZone = app?.timeZone ?? (isDefault ? delivery.defaultTimeZone : nil)
            let appCap = app?.frequencyCap ?? (isDefault ? delivery.frequencyCap : nil)
            var timing = input.timing
            if !input.uncapped, timing?.cap == nil, let cap = appCap {
                timing = timing ?? SendTiming()
                timing?.cap = cap
            }
            if input.uncapped { timing?.cap = nil }
            // Without "missing_time_zone", a device without a zone takes the app's when it has one.
            if timing?.needsZone == true, !input.givesMissingZone, appZone != nil {
                timing?.missingZone = .appDefault
            }
            let receipt = try await state.delivery.submit(input.push, timing: timing, defaultZone: appZone)
            let pushId = receipt.push.id
            // A scheduled push is not waited for: its deliveries are due later.
            if let last = receipt.push.plan?.lastSendAt, last > receipt.push.createdAt + 1 { input.wait = false }
            if input.wait, receipt.deliveries > 0 {
                let timeout = Duration.milliseconds(Int64(state.configuration.delivery.waitTimeout * 1000))
                let done = try await state.delivery.waitUntilDone(pushId: pushId, timeout: timeout)
                guard let report = try await state.delivery.outbox.report(pushId: pushId) else {
                    throw APIError(.internalServerError, reason: .internalError, message: "the push vanished")
                }
                return JSONIO.response(
                    ReportView(report: report, withResults: true, summary: try await summary(report)),
                    status: done ? .ok : .accepted)
            }
            if input.wait, let report = try await state.delivery.outbox.report(pushId: pushId) {
                return JSONIO.response(
                    ReportView(report: report, withResults: true, summary: try await summary(report)))
            }
            return JSONIO.response(AcceptedView(receipt: receipt), status: .accepted)
        }
        router.get("/v1/push", permission: .readOrSend) { _, _ in
            // The app's pushes that still have deliveries to send (scheduled ones first among them), soonest first.
            var items: [ScheduledView] = []
            for row in try await state.delivery.outbox.scheduled(app: AppScope.current.app, limit: 100) {
                guard let push = try await state.delivery.outbox.push(id: row.pushId), Self.isVisible(push) else {
                    continue
                }
                items.append(ScheduledView(push: push, pending: row.pending, nextAt: row.nextAt))
                if items.count == 100 { break }
            }
            return JSONIO.response(ScheduledList(pushes: items))
        }
        router.post("/v1/push/:pushId/cancel", permission: .send) { _, context in
            let id = try context.parameters.require("pushId")
            guard let push = try await state.delivery.outbox.push(id: id), Self.isVisible(push) else {
                throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
            }
            let cancelled = try await state.delivery.outbox.cancel(
                pushId: id, at: state.clock.now().timeIntervalSince1970)
            let sending = try await state.delivery.outbox.pendingCount(pushId: id)
            state.delivery.pushChanged(id)
            return JSONIO.response(CancelledView(pushId: id, cancelled: cancelled, sending: sending))
        }
        router.post("/v1/receipts", permission: .receipt) { request, _ in
            let document = try await JSONIO.readJSON(request, limit: 4_096)
            let body = try BodyMembers(
                document, allowed: ["push_id", "device_id"], shape: #"{"push_id": "...", "device_id": "..."}"#)
            let pushId = try body.requiredString("push_id", "the push the notification came with")
            let shownId = try body.requiredString("device_id", "the device that showed it")
            if let problem = DeviceID.problem(with: shownId) {
                throw APIError.invalid(.invalidDeviceID, "device_id: \(problem)", field: "device_id")
            }
            // Another app's push is answered as one that does not exist.
            guard let push = try await state.delivery.outbox.push(id: pushId), Self.isVisible(push) else {
                throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(pushId)'")
            }
            let outcome = try await state.delivery.outbox.confirm(
                pushId: pushId, deviceId: AppScope.current.key(shownId), at: state.clock.now().timeIntervalSince1970)
            guard outcome != .notSent else {
                throw APIError(
                    .notFound, reason: .deviceNotInPush,
                    message: "push '\(pushId)' was not sent to device '\(shownId)' (not one of its devices, or "
                        + "capped, skipped, cancelled or failed)")
            }
            let new = outcome == .recorded
            return JSONIO.response(
                ReceiptView(pushId: pushId, deviceId: shownId, new: new), status: new ? .created : .ok)
        }
        router.get("/v1/push/:pushId", permission: .readOrSend) { request, context in
            let id = try context.parameters.require("pushId")
            // `results=false`: the counts and the summary without each device's results, for a client that only
            // watches pushes end (a done push of 1,000 devices is otherwise some 300 KB of JSON).
            var withResults = true
            if let raw = request.uri.queryParameters.get("results") {
                guard let value = Bool(raw) else {
                    throw APIError.invalid(.invalidRequest, "results must be true or false", field: "results")
                }
                withResults = value
            }
            // `wait=<seconds>`: answer once the push is done (no delivery pending), or after the wait, whichever
            // comes first (at most ENRICH_PUSH_WAIT_TIMEOUT): a client watching a push end needs no polling.
            if let raw = request.uri.queryParameters.get("wait") {
                guard let value = QueryNumber.seconds(raw), (0...600).contains(value) else {
                    throw APIError.invalid(
                        .invalidRequest,
                        "wait must be seconds from 0 to 600 written in decimal digits, e.g. 30 or 2.5 (no sign, "
                            + "exponent or hex; waited at most ENRICH_PUSH_WAIT_TIMEOUT)",
                        field: "wait")
                }
                let wait = min(value, state.configuration.delivery.waitTimeout)
                // Another app's push (or none) is not waited for: it is answered 404 below at once. Nor is a push
                // whose last send time is after the wait ends (scheduled, held by quiet hours): it cannot be done
                // by then, and it is answered with its progress at once.
                if wait > 0, let push = try await state.delivery.outbox.push(id: id), Self.isVisible(push),
                    (push.plan?.lastSendAt ?? 0) <= state.clock.now().timeIntervalSince1970 + wait
                {
                    _ = try await state.delivery.waitUntilDone(pushId: id, timeout: .milliseconds(Int64(wait * 1000)))
                }
            }
            // A push belongs to the app of its devices: another app's push is answered as one that does not exist.
            // One read gives the push, its devices and its deliveries (the counts are the deliveries'), so a client
            // polling a push costs one transaction per look.
            guard let report = try await state.delivery.outbox.report(pushId: id), Self.isVisible(report.push) else {
                throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
            }
            let counts = report.counts
            let summary = try await summary(report)
            let callback = try await state.delivery.outbox.callbackStatus(pushId: id).map(CallbackView.init)
            // The per-delivery results come once every one is final.
            if counts[.pending, default: 0] > 0 {
                return JSONIO.response(
                    ProgressView(
                        push: report.push, counts: counts, summary: summary, callback: callback,
                        waiting: WaitingView.groups(of: report.deliveries)))
            }
            return JSONIO.response(
                ReportView(
                    report: report, withResults: withResults && report.isDone, summary: summary, callback: callback))
        }
    }

    /// The push's timing as asked (`send_at`, `local_time`, `quiet_hours`, `cap`) and its first and last send times.
    struct PlanView: JSONObjectRepresentable {
        var plan: PushPlan

        func writeJSON(into object: inout JSONObjectWriter) {
            if case .object(let members) = plan.stored {
                for key in members.keys.sorted() where key != "held" { object.field(key, json: members[key]) }
            }
        }
    }

    func summary(_ report: PushReport) async throws -> PushSummary {
        PushSummary(
            report: report, confirmed: try await state.delivery.outbox.confirmedCount(pushId: report.push.id),
            now: state.clock.now().timeIntervalSince1970)
    }

    /// True when the push is the request's app's (its devices are stored under the app, `AppNamespace`).
    static func isVisible(_ push: PushDefinition) -> Bool {
        guard let first = push.deviceIds.first else { return AppScope.current.app == AppNamespace.defaultApp }
        return AppNamespace.app(of: first) == AppScope.current.app
    }

    /// Where the push's callback stands: `{url, state, attempts, last_outcome, last_attempt_at, next_attempt_at}`.
    struct CallbackView: JSONObjectRepresentable {
        var status: PushCallbackStatus

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("attempts", status.attempts)
            object.field("last_attempt_at", status.lastAttemptAt)
            object.field("last_outcome", status.outcome)
            object.field("next_attempt_at", status.nextAttemptAt)
            object.field("state", status.state)
            object.field("url", status.url)
        }
    }

    struct ScheduledView: JSONObjectRepresentable {
        var push: PushDefinition
        var pending: Int
        var nextAt: Double

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("created_at", push.createdAt)
            object.field("devices", push.deviceIds.count)
            object.field("next_send_at", nextAt)
            object.field("pending", pending)
            object.field("plan", object: push.plan.map(PlanView.init))
            object.field("push_id", push.id)
        }
    }

    struct ScheduledList: JSONObjectRepresentable {
        var pushes: [ScheduledView]
        func writeJSON(into object: inout JSONObjectWriter) { object.field("pushes", objects: pushes) }
    }

    struct CancelledView: JSONObjectRepresentable {
        var pushId: String
        var cancelled: Int
        var sending: Int

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("cancelled", cancelled)
            object.field("push_id", pushId)
            // Deliveries a worker holds now go out (they may be on the wire); none else will.
            object.field("still_sending", sending)
        }
    }

    struct ReceiptView: JSONObjectRepresentable {
        var pushId: String
        var deviceId: String
        var new: Bool

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("already_confirmed", !new)
            object.field("confirmed", true)
            object.field("device_id", deviceId)
            object.field("push_id", pushId)
        }
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
        var summary: PushSummary? = nil
        var callback: CallbackView? = nil
        /// Why pending deliveries that were tried are still pending, grouped.
        var waiting: [WaitingView] = []

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("callback", object: callback)
            object.field("plan", object: push.plan.map(PlanView.init))
            object.field("summary", object: summary)
            object.field("waiting", objects: waiting)
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
        var summary: PushSummary? = nil
        var callback: CallbackView? = nil

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("callback", object: callback)
            object.field("plan", object: report.push.plan.map(PlanView.init))
            object.field("summary", object: summary)
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

    static let members =
        [
            "device_ids", "payload", "push_type", "priority", "expiration", "collapse_id", "topic", "enrich", "mode",
            "wait", "audience", "missing_time_zone", "cap", "callback_url",
        ] + timedMembers
    /// The members that make a push timed: its "{{now}}" is filled in as each copy is sent.
    static let timedMembers = ["send_at", "local_time", "quiet_hours"]

    /// `send_at`, `local_time`, `quiet_hours`, `missing_time_zone` and `cap`, as given (nil: none given).
    var timing: SendTiming?
    /// `"cap": null`: this push is not capped, whatever the app's default.
    var uncapped = false
    /// True when the request said `missing_time_zone`.
    var givesMissingZone = false

    /// Reads the timing members; `now` bounds `send_at`.
    mutating func readTiming(_ body: BodyMembers, now: Double) throws {
        var timing = SendTiming()
        var given = false
        if let sendAt = try body.number("send_at") {
            guard sendAt >= now - 300, sendAt <= now + Self.maximumScheduleAhead else {
                throw body.invalid(
                    "send_at",
                    "must be epoch seconds from 5 minutes ago to \(Int(Self.maximumScheduleAhead / 86_400)) days ahead")
            }
            if let expiration = push.expiration, expiration.epochSeconds > 0, Double(expiration.epochSeconds) < sendAt {
                throw body.invalid(
                    "send_at", "is after the push's expiration (\(expiration.epochSeconds)): it would expire unsent")
            }
            timing.sendAt = sendAt
            given = true
        }
        if let text = try body.string("local_time") {
            guard let time = LocalTime(parsing: text) else {
                throw body.invalid("local_time", "must be HH:MM, 24 h, in each device's own zone (e.g. \"09:30\")")
            }
            timing.localTime = time
            given = true
        }
        if let quiet = try body.object(
            "quiet_hours", allowed: ["window", "action"],
            shape: #"{"window": "22:00-08:00", "action": "hold"|"drop"}"#)
        {
            let action = try quiet.choice("action", QuietHours.Action.self) ?? .hold
            guard let window = try quiet.string("window"), let hours = QuietHours(window: window, action: action) else {
                throw APIError.invalid(
                    .invalidRequest,
                    "quiet_hours.window must be HH:MM-HH:MM in each device's own zone (e.g. \"22:00-08:00\"), "
                        + "its start and end different", field: "quiet_hours")
            }
            timing.quietHours = hours
            given = true
        }
        if let missing = try body.choice("missing_time_zone", SendTiming.MissingZone.self) {
            timing.missingZone = missing
            givesMissingZone = true
            given = true
        }
        if body.contains("cap"), body.value("cap") == nil {
            uncapped = true
        } else if let cap = try body.object(
            "cap", allowed: ["max", "window_s"], shape: #"{"max": 3, "window_s": 86400}"#)
        {
            guard let max = try cap.integer("max"), (1...1_000).contains(max),
                let window = try cap.number("window_s", in: 60...31_536_000)
            else {
                throw APIError.invalid(
                    .invalidRequest, "cap must be {\"max\": 1 to 1000, \"window_s\": 60 to 31536000}", field: "cap")
            }
            timing.cap = FrequencyCap(max: Int(max), window: window)
            given = true
        }
        self.timing = given ? timing : nil
    }

    /// The furthest ahead a push can be scheduled.
    static let maximumScheduleAhead = 30.0 * 86_400

    init(_ document: JSONValue, now: Double, apps: AppsConfiguration?, callbackHosts: [String] = []) throws {
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
        // token; the registration's topic is not known yet). A push with timing has its "{{now}}" filled in when
        // sent: it is measured filled in.
        let timed = Self.timedMembers.contains { body.value($0) != nil }
        let bytes = (timed ? PayloadStamp.stamp(payload.json, now: Int64(now)) : payload.json).encodedData()
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
            id: RandomUUID.lowercased(), createdAt: now, payload: payload.json, pushType: pushType,
            priority: priority, expiration: expiration, collapseId: collapseId, topic: topic, enrich: enrich,
            mode: mode, deviceIds: deviceIds,
            callbackURL: try Self.callbackURL(body.string("callback_url"), hosts: callbackHosts))
        try readTiming(body, now: now)
    }

    /// A push's `callback_url`: http(s), no credentials in it, on a host the operator allows.
    static func callbackURL(_ text: String?, hosts: [String]) throws -> String? {
        guard let text else { return nil }
        let field = "callback_url"
        if let problem = OutboundURL.problem(text) {
            throw APIError.invalid(
                .invalidRequest,
                "callback_url is refused: \(problem). It must be \(OutboundURL.allowed), e.g. "
                    + "https://hooks.example.com/push-final",
                field: field)
        }
        guard let host = URL(string: text)?.host?.lowercased() else {
            throw APIError.invalid(.invalidRequest, "callback_url has no host", field: field)
        }
        guard !hosts.isEmpty else {
            throw APIError.invalid(
                .invalidRequest,
                "callback_url is off on this service: its operator names the hosts pushes may call back in "
                    + "ENRICH_PUSH_CALLBACK_HOSTS", field: field)
        }
        guard PushCallbacks.isAllowed(host: host, hosts: hosts) else {
            throw APIError.invalid(
                .invalidRequest,
                "callback_url's host '\(host)' is not one this service may call (ENRICH_PUSH_CALLBACK_HOSTS names "
                    + "them)", field: field)
        }
        return text
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
