import Crypto
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import HTTPTypes
import Logging
import MockAPNs
import TestSupport
import Testing

@testable import EnrichmentService

/// Data per app and keys scoped to apps: an app's key that names another app's device, push, token, activity,
/// region or channel gets exactly the answer it gets for one that does not exist, on every route.
@Suite("Apps keep their own data; keys are scoped (admin, all, read, send)")
struct AppScopeTests {
    static let keys: [(name: String, key: String, access: String, app: String?)] = [
        ("ops", "admin-key-0c1f", "admin", nil),
        ("consumer-backend", "consumer-all-55aa", "all", "consumer"),
        ("consumer-reader", "consumer-read-81b2", "read", "consumer"),
        ("consumer-sender", "consumer-send-a7e0", "send", "consumer"),
        ("courier-backend", "courier-all-3d9c", "all", "courier"),
        ("legacy-backend", "default-all-6b21", "all", "default"),
    ]

    static func bearer(_ key: String) -> [String: String] { ["Authorization": "Bearer \(key)"] }
    static let admin = bearer("admin-key-0c1f")
    static let consumer = bearer("consumer-all-55aa")
    static let courier = bearer("courier-all-3d9c")

    static func hex(_ key: String) -> String {
        SHA256.hash(data: Data(key.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The apps file's `keys` member: the keys above, each stored as its SHA-256.
    static var keysMember: String {
        let items = keys.map { key in
            #"{"name":"\#(key.name)","sha256":"\#(hex(key.key))","access":"\#(key.access)""#
                + (key.app.map { #","app":"\#($0)""# } ?? "") + "}"
        }
        return #""keys":[\#(items.joined(separator: ","))]"#
    }

    /// The two-team apps of `AppsTests`, with the keys above.
    func withScopedApps<T: Sendable>(
        _ adjust: @escaping @Sendable (inout ServiceConfiguration) -> Void = { _ in },
        _ body: @Sendable (ServiceClient, MockAPNsState) async throws -> T
    ) async throws -> T {
        try await AppsTests().withApps(members: Self.keysMember, adjust, body)
    }

    /// What the courier app owns, made with its own key: the ids the consumer app's key then names.
    struct CourierData {
        var pushID: String
        var channelID: String
    }

    static let device = "shared-device"
    static let token = deviceToken(0xC0)
    static let startToken = deviceToken(0xC1)
    static let activityToken = deviceToken(0xC2)

    func makeCourierData(_ client: ServiceClient) async throws -> CourierData {
        let h = Self.courier
        let now = Int64(Date().timeIntervalSince1970)
        let d = Self.device
        let fix = try await client.post(
            "/v1/devices/\(d)/locations",
            json: #"{"locations":[{"latitude":48.8584,"longitude":2.2945,"utc_timestamp":\#(now - 5)}]}"#, headers: h)
        #expect(fix.status == 200, "\(fix.text)")
        #expect(try await register(client, d, Self.token, topic: "com.b", headers: h).status == 201)
        let start = try await client.put(
            "/v1/devices/\(d)/activity-types/Delivery/push-to-start-token",
            json: #"{"token":"\#(Self.startToken)","topic":"com.b","environment":"sandbox"}"#, headers: h)
        #expect(start.status == 201, "\(start.text)")
        let activity = try await client.put(
            "/v1/devices/\(d)/activities/A-1",
            json:
                #"{"activity_type":"Delivery","token":"\#(Self.activityToken)","topic":"com.b","environment":"sandbox"}"#,
            headers: h)
        #expect(activity.status == 201, "\(activity.text)")
        let region = try await client.post(
            "/v1/regions", json: #"{"id":"depot","latitude":48.8584,"longitude":2.2945,"radius":150}"#, headers: h)
        #expect(region.status == 201, "\(region.text)")
        let push = try await client.post(
            "/v1/push",
            json: pushBody(
                devices: [d], payload: #"{"aps":{"alert":"hi","timestamp":\#(now)}}"#, extra: #""enrich":false"#),
            headers: h)
        #expect(push.json?["counts"]?["delivered"] == .int(1), "\(push.text)")
        // And one scheduled for later: the consumer's list of pending pushes must not show it.
        let later = try await client.post(
            "/v1/push",
            json: pushBody(
                devices: [d], payload: #"{"aps":{"alert":"later","timestamp":"{{now}}"}}"#,
                extra: #""enrich":false,"send_at":\#(now + 3_600)"#),
            headers: h)
        #expect(later.status == 202, "\(later.text)")
        let channel = try await client.post(
            "/v1/channels", json: #"{"bundle_id":"com.b","environment":"sandbox","storage_policy":"none"}"#, headers: h)
        #expect(channel.status == 201, "\(channel.text)")
        return CourierData(
            pushID: try #require(push.json?["push_id"]?.stringValue),
            channelID: try #require(channel.json?["channel_id"]?.stringValue))
    }

    /// One request of the walk: method, path pattern, the body, and whether its answer must be the same for the
    /// courier's ids as for ids that exist nowhere.
    struct Probe: Sendable {
        var method: String
        var pattern: String
        var body: String?
    }

    static func probes(now: Int64) -> [Probe] {
        let payload = #"{"aps":{"alert":"hi","timestamp":\#(now)}}"#
        return [
            // Reads, sends and deletes first; then the writes, which make the consumer's own (separate) data.
            Probe(method: "GET", pattern: "/v1/devices/:deviceId/location"),
            Probe(method: "GET", pattern: "/v1/devices/:deviceId/apns-tokens"),
            Probe(method: "GET", pattern: "/v1/devices/:deviceId/fcm-tokens"),
            Probe(method: "GET", pattern: "/v1/devices/:deviceId/visits"),
            Probe(method: "GET", pattern: "/v1/devices/:deviceId/zois"),
            Probe(method: "GET", pattern: "/v1/devices/:deviceId/events"),
            Probe(method: "GET", pattern: "/v1/devices/:deviceId/activities"),
            Probe(method: "GET", pattern: "/v1/push/:pushId"),
            Probe(method: "GET", pattern: "/v1/push/:pushId/deliveries"),
            Probe(method: "GET", pattern: "/v1/push"),
            Probe(
                method: "POST", pattern: "/v1/receipts", body: #"{"push_id":"{pushId}","device_id":"{deviceId}"}"#),
            Probe(method: "GET", pattern: "/v1/regions"),
            Probe(method: "GET", pattern: "/v1/channels"),
            Probe(method: "GET", pattern: "/v1/channels/:channelId"),
            Probe(
                method: "POST", pattern: "/v1/enrich",
                body: #"{"device_id":"{deviceId}","payload":\#(locationPayload(timestamp: "\(now)"))}"#),
            // The courier's device is right there: the consumer's audience holds nobody.
            Probe(
                method: "POST", pattern: "/v1/audiences/preview",
                body: #"{"audience":{"near":{"latitude":48.8584,"longitude":2.2945,"radius_m":500}},"sample":10}"#),
            Probe(
                method: "POST", pattern: "/v1/push",
                body: #"{"device_ids":["{deviceId}"],"payload":\#(payload),"enrich":false}"#),
            Probe(
                method: "POST", pattern: "/v1/devices/:deviceId/activity-types/:activityType/start",
                body: #"{"alert":{"title":"t","body":"b"},"content_state":{"eta":5},"attributes":{}}"#),
            Probe(
                method: "POST", pattern: "/v1/devices/:deviceId/activities/:activityId/update",
                body: #"{"content_state":{"eta":4}}"#),
            Probe(
                method: "POST", pattern: "/v1/devices/:deviceId/activities/:activityId/end",
                body: #"{"content_state":{"eta":0}}"#),
            Probe(
                method: "POST", pattern: "/v1/channels/:channelId/broadcast",
                body: #"{"event":"update","content_state":{"eta":1}}"#),
            Probe(
                method: "POST", pattern: "/v1/push/:pushId/devices", body: #"{"device_ids":["{deviceId}"]}"#),
            Probe(method: "POST", pattern: "/v1/push/:pushId/close"),
            Probe(method: "POST", pattern: "/v1/push/:pushId/cancel"),
            Probe(method: "DELETE", pattern: "/v1/devices/:deviceId/apns-tokens/:token"),
            Probe(method: "DELETE", pattern: "/v1/devices/:deviceId/fcm-tokens/:token"),
            Probe(method: "DELETE", pattern: "/v1/devices/:deviceId/activity-types/:activityType/push-to-start-token"),
            Probe(method: "DELETE", pattern: "/v1/devices/:deviceId/activities/:activityId"),
            Probe(method: "DELETE", pattern: "/v1/regions/:regionId"),
            Probe(method: "DELETE", pattern: "/v1/channels/:channelId"),
            Probe(method: "DELETE", pattern: "/v1/devices/:deviceId"),
            Probe(
                method: "POST", pattern: "/v1/devices/:deviceId/locations",
                body: #"{"locations":[{"latitude":40.5,"longitude":-3.5,"utc_timestamp":\#(now - 5)}]}"#),
            Probe(method: "POST", pattern: "/v1/devices/:deviceId/visits", body: #"{"visits":[]}"#),
            Probe(
                method: "PUT", pattern: "/v1/devices/:deviceId/apns-tokens/:token",
                body: #"{"topic":"com.a","environment":"sandbox"}"#),
            Probe(method: "PUT", pattern: "/v1/devices/:deviceId/fcm-tokens/:token", body: #"{"topic":"com.a"}"#),
            Probe(
                method: "PUT", pattern: "/v1/devices/:deviceId/activity-types/:activityType/push-to-start-token",
                body: #"{"token":"\#(deviceToken(0xA1))","topic":"com.a","environment":"sandbox"}"#),
            Probe(
                method: "PUT", pattern: "/v1/devices/:deviceId/activities/:activityId",
                body:
                    #"{"activity_type":"{activityType}","token":"\#(deviceToken(0xA2))","topic":"com.a","environment":"sandbox"}"#
            ),
            Probe(
                method: "POST", pattern: "/v1/regions",
                body: #"{"id":"{regionId}","latitude":40.0,"longitude":-3.0,"radius":100}"#),
            Probe(
                method: "POST", pattern: "/v1/channels",
                body: #"{"bundle_id":"com.a","environment":"sandbox","storage_policy":"none"}"#),
        ]
    }

    /// Routes that hold no app's data: the POI catalogue (shared by every app, changed by admin keys only),
    /// operations and the preview pages (an admin's).
    static let appless: Set<String> = [
        "GET /health", "GET /health/live", "GET /health/ready", "GET /metrics", "POST /v1/pois",
        "GET /v1/pois/:storeId", "DELETE /v1/pois/:storeId", "GET /stores/search", "GET /preview", "POST /preview",
        "POST /preview/login", "POST /preview/logout", "GET /preview/audience", "POST /preview/audience",
    ]

    /// The service's route table, as `buildRouter` records it.
    static func routeTable() async throws -> [String] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("routes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = ServiceConfiguration()
        configuration.databasePath = directory.appendingPathComponent("db.sqlite").path
        let runtime = try await EnrichmentRuntime.open(
            configuration, clock: SystemWallClock(), logger: Logger(label: "routes"), deliveryObserver: nil,
            placesInBackground: false)
        let table = RouteTable()
        _ = buildRouter(ServiceState(runtime: runtime, metrics: ServiceMetrics()), table: table)
        return table.all.map { "\($0.method.rawValue) \($0.path)" }
    }

    @Test("every route is walked: no app-scoped route is left out of the cross-app probes")
    func everyRouteIsProbed() async throws {
        let routes = Set(try await Self.routeTable())
        let probed = Set(Self.probes(now: 0).map { "\($0.method) \($0.pattern)" })
        #expect(routes.subtracting(probed).subtracting(Self.appless).sorted() == [])
        #expect(probed.subtracting(routes).sorted() == [])
    }

    static let unreserved = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))

    /// The path and body of a probe with the given ids.
    static func concrete(_ probe: Probe, ids: [String: String]) -> (path: String, body: String?) {
        var path = probe.pattern
        var body = probe.body
        for (name, value) in ids {
            let encoded = value.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? value
            path = path.replacingOccurrences(of: ":\(name)", with: encoded)
            body = body?.replacingOccurrences(of: "{\(name)}", with: value)
        }
        return (path, body)
    }

    static func send(_ client: ServiceClient, _ probe: Probe, ids: [String: String], headers: [String: String])
        async throws -> ServiceClient.Reply
    {
        let (path, body) = concrete(probe, ids: ids)
        switch probe.method {
        case "GET": return try await client.get(path, headers: headers)
        case "DELETE": return try await client.delete(path, headers: headers)
        case "PUT": return try await client.put(path, json: body ?? "{}", headers: headers)
        default: return try await client.post(path, json: body ?? "{}", headers: headers)
        }
    }

    /// An answer with the ids and what changes from one request to the next taken out.
    static func normalized(_ reply: ServiceClient.Reply, ids: [String: String]) -> String {
        var text = reply.text
        for (name, value) in ids.sorted(by: { $0.value.count > $1.value.count }) {
            text = text.replacingOccurrences(of: value, with: "<\(name)>")
        }
        // Push ids, creation times and request ids are new at every request.
        for pattern in [
            #""push_id":"[^"]*""#, #""status_url":"[^"]*""#, #""deliveries_url":"[^"]*""#, #""created_at":[0-9.e+]+"#,
            #""apns_id":"[^"]*""#,
            #""received_at":[0-9.e+]+"#, #""age_seconds":[0-9.e+-]+"#, #""registered_at":[0-9.e+]+"#,
            #""elapsed_ms":[0-9.e+-]+"#, #""evaluated_at":[0-9.e+]+"#, #""apns_request_id":"[^"]*""#,
            #""channel_id":"[^"]*""#, #""places_ms":[0-9.e+-]+"#, #""timestamp":[0-9]+"#,
        ] {
            text = text.replacingOccurrences(of: pattern, with: "", options: .regularExpression)
        }
        return "\(reply.status) \(text)"
    }

    @Test(
        "an app's key naming another app's device, token, activity, push, region or channel gets the answer of one that does not exist"
    )
    func noRouteLeaksAnotherApp() async throws {
        try await withScopedApps { client, mock in
            let data = try await makeCourierData(client)
            let now = Int64(Date().timeIntervalSince1970)
            let courierIDs = [
                "deviceId": Self.device, "token": Self.token, "activityType": "Delivery", "activityId": "A-1",
                "pushId": data.pushID, "regionId": "depot", "channelId": data.channelID,
            ]
            let nowhere = [
                "deviceId": "nowhere-device", "token": deviceToken(0xEE), "activityType": "Nowhere",
                "activityId": "A-404", "pushId": UUID().uuidString.lowercased(), "regionId": "nowhere",
                "channelId": "bm93aGVyZQ==",
            ]
            let pushesBefore = mock.receivedCount
            for probe in Self.probes(now: now) {
                let seen = try await Self.send(client, probe, ids: courierIDs, headers: Self.consumer)
                let unseen = try await Self.send(client, probe, ids: nowhere, headers: Self.consumer)
                #expect(
                    Self.normalized(seen, ids: courierIDs) == Self.normalized(unseen, ids: nowhere),
                    "\(probe.method) \(probe.pattern): \(seen.text) — \(unseen.text)")
                #expect(
                    !seen.text.contains("com.b"), "\(probe.method) \(probe.pattern) shows the courier app: \(seen.text)"
                )
            }
            // Nothing the consumer's key did reached the courier's devices.
            #expect(mock.receivedPushes.dropFirst(pushesBefore).allSatisfy { $0.topic != "com.b" })

            // The courier's data is all still there, as it was.
            let h = Self.courier
            let location = try await client.get("/v1/devices/\(Self.device)/location", headers: h)
            #expect(location.json?["latitude"] == .double(48.8584), "\(location.text)")
            let tokens = try await client.get("/v1/devices/\(Self.device)/apns-tokens", headers: h)
            #expect(tokens.json?["tokens"]?[0]?["topic"] == .string("com.b"))
            #expect(tokens.json?["tokens"]?[1] == nil)
            let activities = try await client.get("/v1/devices/\(Self.device)/activities", headers: h)
            #expect(activities.json?["activities"]?[0]?["token"] == .string(Self.activityToken), "\(activities.text)")
            let regions = try await client.get("/v1/regions", headers: h)
            #expect(regions.json?["regions"]?[0]?["id"] == .string("custom_depot"), "\(regions.text)")
            #expect(regions.json?["regions"]?[0]?["latitude"] == .double(48.8584))
            #expect(regions.json?["regions"]?[1] == nil)
            #expect(try await client.get("/v1/push/\(data.pushID)", headers: h).status == 200)
            let channelPath = data.channelID.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? ""
            #expect(try await client.get("/v1/channels/\(channelPath)", headers: h).status == 200)

            // The same device id in the consumer app is another device: its own fix, its own token.
            let own = try await client.get("/v1/devices/\(Self.device)/location", headers: Self.consumer)
            #expect(own.json?["latitude"] == .double(40.5), "\(own.text)")
            #expect(own.json?["device_id"] == .string(Self.device))
        }
    }

    @Test("read, send and app keys do only what their scope says; Enrich-App picks the app of an admin key")
    func scopes() async throws {
        try await withScopedApps { client, _ in
            let now = Int64(Date().timeIntervalSince1970)
            let read = Self.bearer("consumer-read-81b2")
            let send = Self.bearer("consumer-send-a7e0")
            #expect(
                try await register(client, "p1", deviceToken(1), topic: "com.a", headers: Self.consumer).status == 201)

            // Read-only: GET and enrich; no write, no send.
            #expect(try await client.get("/v1/devices/p1/apns-tokens", headers: read).status == 200)
            #expect(
                try await client.post(
                    "/v1/enrich", json: enrichBody(device: "p1", payload: locationPayload(timestamp: "\(now)")),
                    headers: read
                ).status == 200)
            let readWrites = try await register(client, "p2", deviceToken(2), topic: "com.a", headers: read)
            #expect(readWrites.status == 403)
            #expect(readWrites.errorReason == "forbidden")
            #expect(readWrites.text.contains("consumer-reader"))
            let pushBodyText = pushBody(
                devices: ["p1"], payload: #"{"aps":{"alert":"hi","timestamp":\#(now)}}"#, extra: #""enrich":false"#)
            #expect(try await client.post("/v1/push", json: pushBodyText, headers: read).status == 403)

            // Send-only: pushes and their results; not the devices' data.
            let sent = try await client.post("/v1/push", json: pushBodyText, headers: send)
            #expect(sent.status == 200, "\(sent.text)")
            let pushID = try #require(sent.json?["push_id"]?.stringValue)
            #expect(try await client.get("/v1/push/\(pushID)", headers: send).status == 200)
            #expect(try await client.get("/v1/push/\(pushID)", headers: read).status == 200)
            #expect(try await client.get("/v1/devices/p1/apns-tokens", headers: send).status == 403)
            #expect(try await register(client, "p3", deviceToken(3), topic: "com.a", headers: send).status == 403)

            // An app's key cannot change the shared POIs; an admin key can.
            let poi = onePOI("s-1", "Depot", lat: 48.1, lng: 2.1)
            #expect(try await client.post("/v1/pois", json: poi, headers: Self.consumer).status == 403)
            #expect([200, 201].contains(try await client.post("/v1/pois", json: poi, headers: Self.admin).status))

            // An app's key naming another app, or an app that does not exist, gets the same 404.
            var other = Self.consumer
            other["Enrich-App"] = "courier"
            let otherApp = try await client.get("/v1/devices/p1/apns-tokens", headers: other)
            other["Enrich-App"] = "no-such-app"
            let noApp = try await client.get("/v1/devices/p1/apns-tokens", headers: other)
            #expect(otherApp.status == 404)
            #expect(otherApp.errorReason == "app_not_found")
            #expect(
                otherApp.text.replacingOccurrences(of: "courier", with: "X")
                    == noApp.text.replacingOccurrences(of: "no-such-app", with: "X"))

            // The admin key reaches any app through Enrich-App; without it, the default app.
            var adminConsumer = Self.admin
            adminConsumer["Enrich-App"] = "consumer"
            let adminView = try await client.get("/v1/devices/p1/apns-tokens", headers: adminConsumer)
            #expect(adminView.json?["tokens"]?[0]?["token"] == .string(deviceToken(1)))
            let defaultView = try await client.get("/v1/devices/p1/apns-tokens", headers: Self.admin)
            #expect(defaultView.json?["tokens"] == .array([]))

            // A topic that is not the app's is refused: one app's key never sends with another's credential.
            let foreign = try await register(client, "p4", deviceToken(4), topic: "com.b", headers: Self.consumer)
            #expect(foreign.status == 422)
            #expect(foreign.errorReason == "topic_not_of_app")
            let foreignDefault = try await register(client, "p4", deviceToken(4), topic: "com.a", headers: Self.admin)
            #expect(foreignDefault.errorReason == "topic_not_of_app")

            // No key, or a wrong one: 401.
            #expect(try await client.get("/v1/devices/p1/apns-tokens").status == 401)
            #expect(
                try await client.get("/v1/devices/p1/apns-tokens", headers: Self.bearer("consumer-all-55ab")).status
                    == 401)
        }
    }

    @Test(
        "a database written before apps upgrades in place to the default app: nothing lost, nothing seen by other apps",
        arguments: Backend.allCases)
    func upgradeToDefaultApp(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("upgrade-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let databasePath = directory.appendingPathComponent("db.sqlite").path
        let (keyFile, caFile) = try writeMockCredentials(into: directory.appendingPathComponent("single"))
        let legacyKey = ["Authorization": "Bearer legacy-admin-1e"]
        let now = Int64(Date().timeIntervalSince1970)
        // 1. As a service before apps: one key that does everything, the ENRICH_APNS_* credentials, no apps file.
        let pushID: String = try await withMock { mock, _ in
            try await withService({ configuration in
                configuration.databasePath = databasePath
                configuration.databaseURL = url.map { Secret($0) }
                configuration.apiKey = Secret("legacy-admin-1e")
                deliverToMock(&configuration, keyFile: keyFile, caFile: caFile, sandbox: mock, production: mock)
            }) { client in
                let fix = try await client.post(
                    "/v1/devices/legacy-phone/locations",
                    json: #"{"locations":[{"latitude":45.75,"longitude":4.85,"utc_timestamp":\#(now - 5)}]}"#,
                    headers: legacyKey)
                #expect(fix.status == 200)
                #expect(try await register(client, "legacy-phone", deviceToken(7), headers: legacyKey).status == 201)
                let region = try await client.post(
                    "/v1/regions", json: #"{"id":"old-shop","latitude":45.75,"longitude":4.85,"radius":200}"#,
                    headers: legacyKey)
                #expect(region.status == 201)
                let push = try await client.post(
                    "/v1/push",
                    json: pushBody(
                        devices: ["legacy-phone"], payload: #"{"aps":{"alert":"hi","timestamp":\#(now)}}"#,
                        extra: #""enrich":false"#), headers: legacyKey)
                #expect(push.json?["counts"]?["delivered"] == .int(1), "\(push.text)")
                return try #require(push.json?["push_id"]?.stringValue)
            }
        }
        // 2. The same database under an apps file with scoped keys: all of it is the default app's.
        try await withScopedApps({ configuration in
            configuration.databasePath = databasePath
            configuration.databaseURL = url.map { Secret($0) }
            configuration.apiKey = Secret("legacy-admin-1e")
        }) { client, _ in
            for key in ["legacy-admin-1e", "admin-key-0c1f", "default-all-6b21"] {
                let h = Self.bearer(key)
                let location = try await client.get("/v1/devices/legacy-phone/location", headers: h)
                #expect(location.json?["latitude"] == .double(45.75), "\(location.text)")
                let tokens = try await client.get("/v1/devices/legacy-phone/apns-tokens", headers: h)
                #expect(tokens.json?["tokens"]?[0]?["token"] == .string(deviceToken(7)), "\(tokens.text)")
                let regions = try await client.get("/v1/regions", headers: h)
                #expect(regions.json?["regions"]?[0]?["id"] == .string("custom_old-shop"), "\(regions.text)")
                let push = try await client.get("/v1/push/\(pushID)", headers: h)
                #expect(push.json?["counts"]?["delivered"] == .int(1), "\(push.text)")
            }
            // Another app's key sees none of it.
            #expect(try await client.get("/v1/devices/legacy-phone/location", headers: Self.consumer).status == 404)
            #expect(try await client.get("/v1/push/\(pushID)", headers: Self.consumer).status == 404)
            #expect(try await client.get("/v1/regions", headers: Self.consumer).json?["regions"] == .array([]))
        }
    }

    @Test(
        "an app's region is entered, left and entered again by its devices; events, context and template show its own ids"
    )
    func regionsPerApp() async throws {
        try await withScopedApps { client, _ in
            let h = Self.courier
            let region = try await client.post(
                "/v1/regions", json: #"{"id":"depot","latitude":48,"longitude":2,"radius":100}"#, headers: h)
            #expect(region.status == 201)
            let t = Date().timeIntervalSince1970 - 600
            func at(_ seconds: Double, metres: Double) -> String {
                fixItem(t + seconds, lat: 48 + metres / 111_195, lng: 2)
            }
            // In, far out (beyond the search around the fix: only the entered record brings the region back), in.
            for (seconds, metres) in [(0.0, 20.0), (60, 5_000), (120, 20)] {
                let reply = try await client.post(
                    "/v1/devices/van-7/locations", json: #"{"locations":[\#(at(seconds, metres: metres))]}"#,
                    headers: h)
                #expect(reply.status == 200, "\(reply.text)")
            }
            let events = try await client.get("/v1/devices/van-7/events", headers: h)
            guard case .array(let items)? = events.json?["events"] else {
                Issue.record("no events: \(events.text)")
                return
            }
            let custom = items.filter { $0["region_id"]?.stringValue?.contains("depot") == true }
            #expect(custom.map { $0["type"]?.stringValue ?? "" } == ["region_enter", "region_exit", "region_enter"])
            #expect(custom.allSatisfy { $0["region_id"] == .string("custom_depot") }, "\(custom)")
            #expect(custom.allSatisfy { $0["device_id"] == .string("van-7") })
            #expect(!events.text.contains("courier/"), "\(events.text)")
            // Inside now: the context names the region by the id the app knows, and so does the template.
            let enriched = try await client.post(
                "/v1/enrich",
                json: enrichBody(
                    device: "van-7", payload: locationPayload(timestamp: "\(Int64(Date().timeIntervalSince1970))")),
                headers: h)
            #expect(enriched.json?["device_context"]?["regions"]?[0] == .string("custom_depot"), "\(enriched.text)")
            #expect(enriched.json?["device_context"]?["region"] == .string("depot"), "\(enriched.text)")
            #expect(!enriched.text.contains("courier/"))
        }
    }
}

@Suite("API keys in the apps file")
struct APIKeyFileTests {
    @Test("ENRICH_API_KEY that is also a key of the apps file stops the start, without showing the key")
    func duplicateAdminKey() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keys-twin-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = try AppsTests.writeApps(
            into: directory,
            members:
                #""keys":[{"name":"twin","sha256":"\#(AppScopeTests.hex("same-key-9f"))","access":"read","app":"consumer"}]"#
        )
        do {
            try await withService({
                $0.delivery.appsFile = path
                $0.apiKey = Secret("same-key-9f")
            }) { _ in }
            Issue.record("the service started")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("key 'twin'"), "\(error.description)")
            #expect(!error.description.contains("same-key-9f"))
        }
    }

    @Test("a key the file gets wrong stops the start with a message naming the key")
    func keyProblems() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keys-bad-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = AppScopeTests.hex("k")
        let cases: [(String, String)] = [
            (#"{"name":"a","sha256":"abc","access":"all","app":"consumer"}"#, "key 'a': sha256 is required"),
            (#"{"name":"b","sha256":"\#(good)","access":"admin","app":"consumer"}"#, "key 'b': an admin key"),
            (#"{"name":"c","sha256":"\#(good)","access":"all","app":"shop"}"#, "key 'c' names app 'shop'"),
            (#"{"name":"d","sha256":"\#(good)","access":"write","app":"consumer"}"#, "key 'd': access is required"),
            (#"{"name":"e","sha256":"\#(good)","access":"read"}"#, "key 'e': a key with access read names its app"),
            (#"{"name":"f","key":"plain","sha256":"\#(good)","access":"admin"}"#, "'key' is unknown"),
        ]
        for (item, expected) in cases {
            let path = try AppsTests.writeApps(into: directory, members: #""keys":[\#(item)]"#)
            do {
                _ = try AppsConfiguration.load(path: path)
                Issue.record("accepted: \(item)")
            } catch {
                #expect(error.description.contains(expected), "\(error.description)")
                #expect(!error.description.contains(good), "the message shows the digest: \(error.description)")
            }
        }
    }
}
