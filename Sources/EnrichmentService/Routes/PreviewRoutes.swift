import Crypto
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import HTTPTypes
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
            radius: state.enricher(forDevice: AppScope.current.key("preview")).settings.placesQuery.radius)
        guard let deviceId, !deviceId.isEmpty else {
            return Self.html(PreviewPage.render(nil, context: context))
        }
        if let problem = DeviceID.problem(with: deviceId) {
            return Self.html(
                PreviewPage.render(nil, context: context, error: "device_id: \(problem)"), .badRequest)
        }
        let payload: NotificationPayload
        do {
            payload = try NotificationPayload(json: try JSONValue.decode(Data(text.utf8)))
        } catch {
            return Self.html(
                PreviewPage.render(nil, context: context, error: "the payload is not valid: \(error)"),
                .badRequest)
        }
        let key = AppScope.current.key(deviceId)
        let result = try await state.enricher(forDevice: key).enrich(deviceId: key, payload: payload)
        context.deviceId = deviceId
        return Self.html(PreviewPage.render(PreviewPage.View(result), context: context))
    }

    /// Where the sign-in form posts the API key.
    static let signInPath = "/preview/login"
    static let signOutPath = "/preview/logout"

    /// An HTML answer with the preview pages' security headers (`PreviewPage.securityHeaders`).
    static func html(_ text: String, _ status: HTTPResponse.Status = .ok) -> Response {
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8"]
        for (name, value) in PreviewPage.securityHeaders {
            if let field = HTTPField.Name(name) { headers[field] = value }
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// A 303 to the preview page, setting or clearing the session cookie.
    static func redirectToPreview(setCookie: String) -> Response {
        var response = html("", .seeOther)
        response.headers[.location] = "/preview"
        response.headers[.setCookie] = setCookie
        return response
    }

    func register(on router: RouteRecorder) {
        router.get("/preview", permission: .admin) { request, _ in
            let query = try request.formQuery()
            return try await page(deviceId: query["device_id"], payloadText: query["payload"])
        }
        router.post(Self.signInPath) { request, _ in
            guard let secret = state.keys.previewSecret else {
                // No admin key: there is nothing to sign in to.
                return Self.redirectToPreview(setCookie: PreviewSession.signOutCookie)
            }
            let body = try await JSONIO.readBody(request, limit: 16 << 10)
            let form = try Request.form(String(decoding: body, as: UTF8.self))
            // Compared by digest in constant time, as the bearer key is.
            guard state.keys.isAdmin(form["key"] ?? "") else {
                return Self.html(
                    PreviewPage.renderSignIn(
                        action: Self.signInPath,
                        error:
                            "That is not one of the service's admin keys (ENRICH_API_KEY or an admin key of the apps file)."
                    ),
                    .unauthorized)
            }
            return Self.redirectToPreview(
                setCookie: PreviewSession(apiKey: secret).signInCookie(
                    now: state.clock.now().timeIntervalSince1970, secure: PreviewSession.cameOverHTTPS(request)))
        }
        router.post(Self.signOutPath) { _, _ in
            Self.redirectToPreview(setCookie: PreviewSession.signOutCookie)
        }
        router.post("/preview", permission: .admin) { request, _ in
            let body = try await JSONIO.readBody(request, limit: state.maxBodyBytes)
            let form = try Request.form(String(decoding: body, as: UTF8.self))
            return try await page(deviceId: form["device_id"], payloadText: form["payload"])
        }
        router.get("/preview/audience", permission: .admin) { request, _ in
            try await audiencePage(try request.formQuery()["audience"])
        }
        router.post("/preview/audience", permission: .admin) { request, _ in
            let body = try await JSONIO.readBody(request, limit: state.maxBodyBytes)
            return try await audiencePage(try Request.form(String(decoding: body, as: UTF8.self))["audience"])
        }
    }

    /// The audience page: the form alone, or the audience's count and map (an audience that breaks a rule is
    /// shown with its message, as the API would answer it).
    func audiencePage(_ text: String?) async throws -> Response {
        let app = AppScope.current.app
        guard let text, !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return Self.html(
                AudienceMapPage.render(audienceText: AudienceMapPage.exampleAudience, app: app, result: nil))
        }
        let started = ContinuousClock.now
        let resolved: (audience: Audience, members: Set<String>)
        do {
            let document = try JSONValue.decode(Data(text.utf8))
            resolved = try await AudienceRoutes.parseAndResolve(document, state: state)
        } catch let error as APIError {
            return Self.html(
                AudienceMapPage.render(audienceText: text, app: app, result: nil, error: error.message), .badRequest)
        } catch {
            return Self.html(
                AudienceMapPage.render(audienceText: text, app: app, result: nil, error: "not JSON: \(error)"),
                .badRequest)
        }
        let elapsed = Double((ContinuousClock.now - started) / .microseconds(1)) / 1000
        let drawn = Array(resolved.members.sorted().prefix(AudienceMapPage.maximumDots))
        let fixes = try await state.fixes.latestFixes(deviceIds: drawn)
        let result = AudienceMapPage.Result(
            count: resolved.members.count, milliseconds: elapsed, members: drawn.compactMap { fixes[$0]?.coordinate },
            sample: resolved.members.map(DeviceRoutes.shown).sorted().prefix(20).map { $0 },
            shapes: resolved.audience.shapes())
        return Self.html(AudienceMapPage.render(audienceText: text, app: app, result: result))
    }
}
