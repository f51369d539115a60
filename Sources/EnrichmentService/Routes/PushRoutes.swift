import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// Enrich-and-send: `POST /v1/push`, `GET /v1/push`, `GET /v1/push/{pushId}` and its deliveries, cancel, receipts.
struct PushRoutes {
    let state: ServiceState

    /// Above this many devices a push is answered 202 unless it says `"wait": true`.
    static let waitDefaultLimit = 100
    /// Up to this many devices a done push's report lists each device's results; a larger push's are listed page
    /// by page (`GET /v1/push/{id}/deliveries`).
    static let resultsLimit = 1_000
    /// How long `POST /v1/push` waits for an audience to be resolved before it answers 202 (`resolving`).
    static let resolveWait = Duration.milliseconds(300)

    func register(on router: RouteRecorder) {
        registerOpen(on: router)
        router.post("/v1/push", permission: .send) { request, _ in
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            var input = try PushRequest(
                document, now: state.clock.now().timeIntervalSince1970, apps: state.configuration.delivery.apps,
                callbackHosts: state.configuration.delivery.callbackHosts)
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
            if let audience = input.audience {
                return try await submitAudience(input, audience: audience, timing: timing, appZone: appZone)
            }
            if input.open { return try await submitOpen(input, timing: timing, appZone: appZone) }
            let receipt = try await state.delivery.submit(input.push, timing: timing, defaultZone: appZone)
            // A scheduled or paced push is not waited for: its deliveries are due later.
            if let last = receipt.push.plan?.lastSendAt, last > receipt.push.createdAt + 1 { input.wait = false }
            if input.push.rate != nil { input.wait = false }
            if input.wait {
                return try await answer(receipt.push.id, waitFor: receipt.deliveries > 0)
            }
            return JSONIO.response(AcceptedView(receipt: receipt), status: .accepted)
        }
        router.get("/v1/push", permission: .readOrSend) { request, _ in
            // The app's pushes, newest first: those still under way (`state=active`, the default) or all of them,
            // a page at a time (`cursor`: the `next_cursor` of the page before).
            let query = request.uri.queryParameters
            let active: Bool
            switch query.get("state") ?? "active" {
            case "active": active = true
            case "all": active = false
            default:
                throw APIError.invalid(.invalidRequest, "state must be active or all", field: "state")
            }
            let limit = try Self.limit(query.get("limit"), default: 100, maximum: 100)
            let cursor = query.get("cursor")
            let now = state.clock.now().timeIntervalSince1970
            let pushes = try await state.delivery.outbox.pushes(
                app: AppScope.current.app, active: active, after: cursor, limit: limit, now: now)
            var items: [ListedPushView] = []
            for status in pushes {
                let next =
                    status.counts.pending > 0 ? try await state.delivery.outbox.nextSendAt(pushId: status.push.id) : nil
                items.append(ListedPushView(status: status, nextAt: next))
            }
            return JSONIO.response(
                PushListView(pushes: items, next: pushes.count == limit ? pushes.last?.push.id : nil))
        }
        router.post("/v1/push/:pushId/cancel", permission: .send) { _, context in
            let id = try context.parameters.require("pushId")
            guard let push = try await state.delivery.outbox.push(id: id), Self.isVisible(push) else {
                throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
            }
            return JSONIO.response(try await cancel(push))
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
            return try await view(id, withResults: withResults)
        }
        router.get("/v1/push/:pushId/deliveries", permission: .readOrSend) { request, context in
            let id = try context.parameters.require("pushId")
            guard let push = try await state.delivery.outbox.push(id: id), Self.isVisible(push) else {
                throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
            }
            let query = request.uri.queryParameters
            var wanted: DeliveryState?
            if let raw = query.get("state") {
                guard let state = DeliveryState(rawValue: raw) else {
                    throw APIError.invalid(
                        .invalidRequest,
                        "state must be one of \(DeliveryState.allCases.map(\.rawValue).joined(separator: ", "))",
                        field: "state")
                }
                wanted = state
            }
            var after: Int64 = 0
            if let raw = query.get("cursor") {
                guard raw.utf8.count <= 18, raw.utf8.allSatisfy({ (48...57).contains($0) }), let value = Int64(raw)
                else {
                    throw APIError.invalid(
                        .invalidRequest, "cursor must be the next_cursor of the page before (digits)", field: "cursor")
                }
                after = value
            }
            let limit = try Self.limit(query.get("limit"), default: 100, maximum: 1_000)
            let page = try await state.delivery.outbox.deliveries(pushId: id, state: wanted, after: after, limit: limit)
            return JSONIO.response(
                DeliveryPageView(
                    pushId: id, deliveries: page, next: page.count == limit ? page.last.map { String($0.id) } : nil))
        }
    }

    /// A page size from the query: `limit` from 1 to `maximum`.
    static func limit(_ raw: String?, default value: Int, maximum: Int) throws -> Int {
        guard let raw else { return value }
        guard let limit = QueryNumber.integer(raw), (1...maximum).contains(limit) else {
            throw APIError.invalid(.invalidRequest, "limit must be an integer from 1 to \(maximum)", field: "limit")
        }
        return limit
    }

    /// A push to an audience: committed at once and resolved in the background. A small audience is resolved
    /// before the answer and answered as a push to its devices is (its results when waited for, 422 when it holds
    /// no device); a large one is answered 202 `resolving`, its devices added chunk by chunk.
    func submitAudience(
        _ input: PushRequest, audience: JSONValue, timing: SendTiming?, appZone: String?
    ) async throws -> Response {
        _ = try await AudienceRoutes.parse(audience, state: state)
        var push = input.push
        push.app = AppScope.current.app
        push.plan = timing.map { PushPlan(timing: $0) }
        try await state.delivery.submit(
            push, audience: String(decoding: JSONWriter.bytes(audience), as: UTF8.self), defaultZone: appZone)
        guard let resolved = try await state.delivery.waitUntilResolved(pushId: push.id, timeout: Self.resolveWait),
            !resolved.resolving
        else {
            return JSONIO.response(ResolvingView(push: push), status: .accepted)
        }
        guard resolved.counts.matched > 0 else {
            throw APIError(
                .unprocessableContent, reason: .audienceEmpty,
                message: "the audience holds no device now: nothing was sent "
                    + "(POST /v1/audiences/preview shows who it holds)")
        }
        var wait = input.explicitWait ?? (resolved.counts.matched <= Self.waitDefaultLimit)
        if (resolved.push.plan?.lastSendAt ?? 0) > push.createdAt + 1 || push.rate != nil { wait = false }
        if wait { return try await answer(push.id, waitFor: resolved.counts.total > 0) }
        return JSONIO.response(ResolvedAcceptedView(status: resolved), status: .accepted)
    }

    /// The answer to a push that waits: its report once done (200), or its progress at the wait's end (202).
    func answer(_ pushId: String, waitFor: Bool) async throws -> Response {
        var done = true
        if waitFor {
            let timeout = Duration.milliseconds(Int64(state.configuration.delivery.waitTimeout * 1000))
            done = try await state.delivery.waitUntilDone(pushId: pushId, timeout: timeout)
        }
        return try await view(pushId, withResults: true, status: done ? .ok : .accepted)
    }

    /// `GET /v1/push/{id}`: the push's counts and summary (from the counts the store keeps), why pending
    /// deliveries wait while any is pending, and once done each device's results up to `resultsLimit` devices.
    func view(_ id: String, withResults: Bool, status code: HTTPResponse.Status = .ok) async throws -> Response {
        let now = state.clock.now().timeIntervalSince1970
        // A push belongs to the app of its devices: another app's push is answered as one that does not exist.
        guard let status = try await state.delivery.outbox.status(pushId: id, now: now), Self.isVisible(status.push)
        else {
            throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
        }
        let callback = try await state.delivery.outbox.callbackStatus(pushId: id).map(CallbackView.init)
        if !status.isDone {
            let waiting = WaitingView.groups(of: try await state.delivery.outbox.waiting(pushId: id, limit: 2_000))
            return JSONIO.response(
                ProgressView(status: status, callback: callback, waiting: waiting), status: code)
        }
        var report: PushReport?
        if withResults, status.counts.matched <= Self.resultsLimit {
            report = try await state.delivery.outbox.report(pushId: id)
        }
        return JSONIO.response(ReportView(status: status, report: report, callback: callback), status: code)
    }

    /// Cancels a push: marked at once, so nothing of it is claimed for sending any more; the answer comes once
    /// what was claimed before (and may be on the wire) is recorded, at most 1 s later, so nothing is sent after
    /// it. A small push's pending deliveries (up to 2,000) are `cancelled` by then; a large one's are in the
    /// background, and the answer says how many they are.
    func cancel(_ push: PushDefinition) async throws -> CancelledView {
        let id = push.id
        let at = state.clock.now().timeIntervalSince1970
        _ = try await state.delivery.outbox.markCancelled(pushId: id, at: at)
        state.delivery.cancelled(id)
        let lease = state.configuration.delivery.lease
        let deadline = ContinuousClock.now + .seconds(1)
        var sending: Int
        if state.delivery.ownsStore {
            // One process claims from the store: what its lanes hold is all that may still go out (no query, which
            // at a million pending deliveries reads each of them).
            sending = await state.delivery.waitUntilLanded(pushId: id, until: deadline)
        } else {
            // Other nodes may hold some: the store says what is leased.
            sending = try await state.delivery.outbox.claimedBefore(pushId: id, at: at, lease: lease)
            while sending > 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                sending = try await state.delivery.outbox.claimedBefore(pushId: id, at: at, lease: lease)
            }
        }
        // One batch swept here: a push of up to 2,000 pending deliveries is all `cancelled` in the answer; a larger
        // one's rest is swept by the retain stage (the answer's `cancelled` counts them all either way).
        _ = try await state.delivery.outbox.sweepCancelled(at: at, limit: 2_000)
        state.delivery.pushChanged(id)
        guard let status = try await state.delivery.outbox.status(pushId: id, now: at) else {
            throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
        }
        return CancelledView(status: status, sending: sending)
    }
}
