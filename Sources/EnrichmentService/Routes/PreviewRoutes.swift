import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird
import NIOCore

/// `/preview`: the notification as the phone would show it, as an HTML page with a form to paste a payload.
struct PreviewRoutes {
    let state: ServiceState

    /// The payload the form starts with: a location push stamped now.
    static func samplePayload(now: Int64) -> String {
        """
        {"aps":{"alert":{"title":"Nearby","body":"Something near you"},"mutable-content":1,\
        "category":"location","timestamp":\(now)}}
        """
    }

    func page(deviceId: String?, payloadText: String?) async throws -> Response {
        let now = Int64(state.clock.now().timeIntervalSince1970)
        let text = payloadText ?? Self.samplePayload(now: now)
        var context = PreviewPage.Context(
            deviceId: deviceId ?? "", payloadText: text, formAction: "/preview",
            radius: state.enricher.settings.placesQuery.radius)
        guard let deviceId, !deviceId.isEmpty else {
            return Self.html(PreviewPage.render(result: nil, context: context))
        }
        if let problem = DeviceID.problem(with: deviceId) {
            return Self.html(
                PreviewPage.render(result: nil, context: context, error: "device_id: \(problem)"), .badRequest)
        }
        let payload: NotificationPayload
        do {
            payload = try NotificationPayload(json: try JSONValue.decode(Data(text.utf8)))
        } catch {
            return Self.html(
                PreviewPage.render(result: nil, context: context, error: "the payload is not valid: \(error)"),
                .badRequest)
        }
        let result = try await state.enricher.enrich(deviceId: deviceId, payload: payload)
        let json = try JSONValue.decode(Data(result.encodedJSON()))
        context.deviceId = deviceId
        return Self.html(PreviewPage.render(result: json, context: context))
    }

    static func html(_ text: String, _ status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    func register(on router: RouteRecorder) {
        router.get("/preview") { request, _ in
            let query = try request.formQuery()
            return try await page(deviceId: query["device_id"], payloadText: query["payload"])
        }
        router.post("/preview") { request, _ in
            let body = try await JSONIO.readBody(request, limit: state.maxBodyBytes)
            let form = try Request.form(String(decoding: body, as: UTF8.self))
            return try await page(deviceId: form["device_id"], payloadText: form["payload"])
        }
    }
}
