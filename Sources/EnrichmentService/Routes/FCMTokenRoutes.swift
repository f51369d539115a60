import APNsCore
import Delivery
import EnrichmentRuntime
import Essentials
import FCMCore
import Foundation
import Hummingbird

/// Where an Android device receives pushes: `/v1/devices/{deviceId}/fcm-tokens[/{token}]`. An FCM registration is
/// stored beside the device's APNs ones (environment `fcm`), belongs to the app whose bundle id is its `topic`,
/// and is sent to with that app's service account (`fcm_credential`, or ENRICH_FCM_SERVICE_ACCOUNT_FILE).
struct FCMTokenRoutes {
    let state: ServiceState

    static func token(_ context: ServiceContext) throws -> String {
        let raw = try context.parameters.require("token")
        let token = raw.removingPercentEncoding ?? raw
        if let problem = FCMRegistrationToken.problem(token) {
            throw APIError.invalid(.invalidToken, problem, field: "token")
        }
        return token
    }

    /// The body: `{"topic": "com.example.app", "time_zone"?: "Europe/Paris" | null, "tags"?: [...]}`: the app's
    /// bundle id (which app, and so which service account, sends to it) and what the device carries.
    static func registration(_ document: JSONValue, apps: AppsConfiguration?) throws -> (
        topic: String, timeZone: String??, tags: [String]?
    ) {
        guard case .object(var members) = document else {
            throw APIError.invalid(.invalidRequest, "expected a JSON object {\"topic\", \"time_zone\"?, \"tags\"?}")
        }
        if members["environment"] != nil {
            throw APIError.invalid(
                .invalidRequest, "an FCM registration has no environment (FCM has one): leave environment out",
                field: "environment")
        }
        // The APNs body's rules for the rest: one reading of topic, zone and tags.
        members["environment"] = .string(APNsEnvironmentName.production.rawValue)
        let body = try TokenRoutes.registration(.object(members), apps: apps)
        return (body.topic, body.timeZone, body.tags)
    }

    func register(on router: RouteRecorder) {
        let devices = router.group("/v1/devices")
        devices.put(":deviceId/fcm-tokens/:token") { request, context in
            let id = try DeviceRoutes.deviceId(context)
            let token = try Self.token(context)
            let body = try Self.registration(
                try await JSONIO.readJSON(request, limit: state.maxBodyBytes), apps: state.configuration.delivery.apps)
            let registration = TokenRegistration(
                deviceId: id, token: token, topic: body.topic, environment: .fcm,
                registeredAt: state.clock.now().timeIntervalSince1970)
            let created = try await state.tokens.register(registration)
            var profile: DeviceProfile?
            if body.timeZone != nil || body.tags != nil {
                try await state.tokens.setProfile(
                    deviceId: id, timeZone: body.timeZone, tags: body.tags, at: registration.registeredAt)
                profile = try await state.tokens.profiles(deviceIds: [id])[id] ?? DeviceProfile()
            }
            return JSONIO.response(
                TokenRoutes.RegisteredView(registration: registration, profile: profile),
                status: created ? .created : .ok)
        }
        devices.get(":deviceId/fcm-tokens") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            return JSONIO.response(
                TokenRoutes.ListView(
                    deviceId: id,
                    registrations: try await state.tokens.registrations(deviceId: id).filter { $0.environment == .fcm },
                    profile: try await state.tokens.profiles(deviceIds: [id])[id]))
        }
        devices.delete(":deviceId/fcm-tokens/:token") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            let token = try Self.token(context)
            let registered = try await state.tokens.registrations(deviceId: id).contains {
                $0.token == token && $0.environment == .fcm
            }
            guard registered, try await state.tokens.remove(deviceId: id, token: token) else {
                throw APIError(
                    .notFound, reason: .tokenNotFound,
                    message:
                        "device '\(DeviceRoutes.shown(id))' has no FCM registration for token \(FCMRegistrationToken.redacted(token))"
                )
            }
            return JSONIO.response(TokenRoutes.RemovedView(deviceId: id, token: token))
        }
    }
}
