import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// Where a device receives pushes: `/v1/devices/{deviceId}/apns-tokens[/{token}]`.
struct TokenRoutes {
    let state: ServiceState

    struct RegistrationView: JSONObjectRepresentable {
        var registration: TokenRegistration

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("active", registration.active)
            object.field("device_id", DeviceRoutes.shown(registration.deviceId))
            object.field("environment", registration.environment.rawValue)
            object.field("invalidated_at", registration.invalidatedAt)
            object.field("platform", registration.environment == .fcm ? "android" : "ios")
            object.field("reason", registration.reason)
            object.field("registered_at", registration.registeredAt)
            object.field("token", registration.token)
            object.field("topic", registration.topic)
        }
    }

    struct ListView: JSONObjectRepresentable {
        var deviceId: String
        var registrations: [TokenRegistration]
        var profile: DeviceProfile?

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("device_id", DeviceRoutes.shown(deviceId))
            object.field("tags", strings: profile?.tags ?? [])
            object.field("time_zone", profile?.timeZone)
            object.field("tokens", objects: registrations.map(RegistrationView.init))
        }
    }

    /// A registration's answer, with what the device carries when the body set it.
    struct RegisteredView: JSONObjectRepresentable {
        var registration: TokenRegistration
        var profile: DeviceProfile?

        func writeJSON(into object: inout JSONObjectWriter) {
            RegistrationView(registration: registration).writeJSON(into: &object)
            if let profile {
                object.field("tags", strings: profile.tags)
                object.field("time_zone", profile.timeZone)
            }
        }
    }

    struct RemovedView: JSONObjectRepresentable {
        var deviceId: String
        var token: String

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("deleted", true)
            object.field("device_id", DeviceRoutes.shown(deviceId))
            object.field("token", token)
        }
    }

    static func token(_ context: ServiceContext) throws -> String {
        let raw = try context.parameters.require("token")
        switch DeviceTokenFormat.normalized(raw) {
        case .success(let token): return token
        case .failure(let problem): throw APIError.invalid(.invalidToken, problem.message, field: "token")
        }
    }

    /// The registration body: `{"topic": "com.example.app", "environment": "sandbox" | "production",
    /// "time_zone"?: "Europe/Paris" | null, "tags"?: ["plan:pro"]}`. The zone and tags are the device's (every
    /// registration of it shares them): given, they replace what it had; absent, they are left as they were.
    static func registration(_ document: JSONValue, apps: AppsConfiguration?) throws -> (
        topic: String, environment: APNsEnvironmentName, timeZone: String??, tags: [String]?
    ) {
        let body = try BodyMembers(
            document, allowed: ["topic", "environment", "time_zone", "tags"],
            shape: "{\"topic\", \"environment\": \"sandbox\"|\"production\", \"time_zone\"?, \"tags\"?}")
        var timeZone: String??
        switch body.value("time_zone") {
        case nil: timeZone = body.contains("time_zone") ? .some(nil) : .none
        case .string(let name)? where ZoneClock.zone(named: name) != nil: timeZone = .some(name)
        default:
            throw body.invalid(
                "time_zone", "must be an IANA zone name such as \"Europe/Paris\" or \"America/New_York\" (or null)")
        }
        var tags: [String]?
        if let value = body.value("tags") {
            guard case .array(let items) = value, items.count <= DeviceTags.maximumPerDevice else {
                throw body.invalid("tags", "must be an array of at most \(DeviceTags.maximumPerDevice) tags")
            }
            tags = []
            for (index, item) in items.enumerated() {
                guard let tag = item.stringValue, DeviceTags.isValid(tag) else {
                    throw APIError.invalid(.invalidRequest, "tags[\(index)]: \(DeviceTags.rule)", field: "tags")
                }
                tags?.append(tag)
            }
        }
        let topic = try body.requiredString("topic", "the app's bundle id")
        if let problem = APNsValidator.topicProblem(topic) { throw body.invalid("topic", problem) }
        try AppScope.current.requireOwnTopic(topic, field: "topic", apps: apps)
        guard
            let environment = try body.apnsEnvironment("environment")
        else {
            throw body.invalid(
                "environment", "is required: sandbox (development builds) or production (TestFlight and App Store)")
        }
        return (topic, environment, timeZone, tags)
    }

    func register(on router: RouteRecorder) {
        let devices = router.group("/v1/devices")
        devices.put(":deviceId/apns-tokens/:token") { request, context in
            let id = try DeviceRoutes.deviceId(context)
            let token = try Self.token(context)
            let body = try Self.registration(
                try await JSONIO.readJSON(request, limit: state.maxBodyBytes), apps: state.configuration.delivery.apps)
            let registration = TokenRegistration(
                deviceId: id, token: token, topic: body.topic, environment: body.environment,
                registeredAt: state.clock.now().timeIntervalSince1970)
            let created = try await state.tokens.register(registration)
            var profile: DeviceProfile?
            if body.timeZone != nil || body.tags != nil {
                try await state.tokens.setProfile(
                    deviceId: id, timeZone: body.timeZone, tags: body.tags, at: registration.registeredAt)
                profile = try await state.tokens.profiles(deviceIds: [id])[id] ?? DeviceProfile()
            }
            return JSONIO.response(
                RegisteredView(registration: registration, profile: profile), status: created ? .created : .ok)
        }
        devices.get(":deviceId/apns-tokens") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            return JSONIO.response(
                ListView(
                    deviceId: id,
                    registrations: try await state.tokens.registrations(deviceId: id).filter(\.environment.isAPNs),
                    profile: try await state.tokens.profiles(deviceIds: [id])[id]))
        }
        devices.delete(":deviceId/apns-tokens/:token") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            let token = try Self.token(context)
            guard try await state.tokens.remove(deviceId: id, token: token) else {
                throw APIError(
                    .notFound, reason: .tokenNotFound,
                    message:
                        "device '\(DeviceRoutes.shown(id))' has no registration for token \(DeviceTokenFormat.redacted(token))"
                )
            }
            return JSONIO.response(RemovedView(deviceId: id, token: token))
        }
    }
}
