import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// Open pushes: `POST /v1/push` with `"open": true`, then `POST /v1/push/{id}/devices` (1,000 device ids a
/// request, as many requests as the list needs) and `POST /v1/push/{id}/close`. One push, one report, one cap
/// count per device, however long the list.
extension PushRoutes {
    func registerOpen(on router: RouteRecorder) {
        router.post("/v1/push/:pushId/devices", permission: .send) { request, context in
            let id = try context.parameters.require("pushId")
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            let body = try BodyMembers(
                document, allowed: ["device_ids", "close"], shape: #"{"device_ids": ["..."], "close": false}"#)
            let close = try body.bool("close") ?? false
            let deviceIds =
                close && body.value("device_ids") == nil
                ? [] : try PushRequest.deviceIds(body.value("device_ids"), allowsNone: close)
            try await visiblePush(id)
            return JSONIO.response(try await add(id, deviceIds: deviceIds, close: close))
        }
        router.post("/v1/push/:pushId/close", permission: .send) { _, context in
            let id = try context.parameters.require("pushId")
            try await visiblePush(id)
            _ = try await state.delivery.close(pushId: id)
            // Closing a push that is no longer open changes nothing: its report is the answer either way.
            return try await view(id, withResults: false)
        }
    }

    /// `POST /v1/push` with `"open": true`: the push is committed open, with its first devices when the request
    /// names some; 202 with its id, for the requests that add the rest.
    func submitOpen(_ input: PushRequest, timing: SendTiming?, appZone: String?) async throws -> Response {
        var push = input.push
        push.app = AppScope.current.app
        push.plan = timing.map { PushPlan(timing: $0) }
        let first = push.deviceIds
        push.deviceIds = []
        try await state.delivery.open(push, defaultZone: appZone)
        guard !first.isEmpty else {
            return JSONIO.response(
                AddedView(pushId: push.id, added: nil, rate: push.rate), status: .accepted)
        }
        let added = try await add(push.id, deviceIds: first, close: false)
        return JSONIO.response(added, status: .accepted)
    }

    /// Adds devices to an open push: the request's answer (what was added, what was already in it, devices that
    /// get nothing and why).
    func add(_ id: String, deviceIds: [String], close: Bool) async throws -> AddedView {
        switch try await state.delivery.add(pushId: id, deviceIds: deviceIds, close: close) {
        case .added(let added):
            return AddedView(pushId: id, added: added, rate: added.push.rate)
        case .tooLarge(let matched, let limit):
            throw APIError(
                .unprocessableContent, reason: .pushTooLarge,
                message: "the push holds \(matched) devices; \(deviceIds.count) more would pass "
                    + "ENRICH_MAX_PUSH_AUDIENCE (\(limit)): nothing was added. Close it and send the rest as another "
                    + "push.", details: ["field": .string("device_ids")])
        case .notOpen:
            throw APIError(
                .conflict, reason: .pushNotOpen,
                message: "push '\(id)' is not open: it was closed (by a request, or after ENRICH_OPEN_PUSH_IDLE "
                    + "seconds with nothing added), cancelled, or made for an audience. Nothing was added; send the "
                    + "devices as a new push.", details: ["field": .string("push_id")])
        }
    }

    /// 404 unless the push exists in the request's app.
    func visiblePush(_ id: String) async throws {
        guard let push = try await state.delivery.outbox.push(id: id), Self.isVisible(push) else {
            throw APIError(.notFound, reason: .pushNotFound, message: "no push has the id '\(id)'")
        }
    }

    /// The answer of an open push's creation and of each request adding to it.
    struct AddedView: JSONObjectRepresentable {
        var pushId: String
        var added: DeliveryEngine.Added?
        var rate: Double?

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("added", added?.added ?? 0)
            object.field("already", strings: (added?.already ?? []).map(DeviceRoutes.shown))
            object.field("deliveries", added?.deliveries ?? 0)
            object.field("devices_url", "/v1/push/\(pushId)/devices")
            object.field("matched", added?.matched ?? 0)
            object.field("not_sent", objects: (added?.notSent ?? []).map(OutcomeView.init))
            object.field("open", added?.open ?? true)
            object.field("push_id", pushId)
            object.field("rate", rate)
            object.field("status_url", "/v1/push/\(pushId)")
        }
    }
}
