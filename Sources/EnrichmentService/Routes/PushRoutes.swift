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

}
