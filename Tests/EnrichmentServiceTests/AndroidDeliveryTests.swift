import APNsCore
import EnrichmentRuntime
import Essentials
import FCMCore
import Foundation
import MockAPNs
import MockFCM
import TestSupport
import Testing

/// The real service with delivery to the APNs mocks and the local FCM (its default app's service account), all
/// over HTTP/2 + TLS.
func withAndroidDelivery<T: Sendable>(
    _ adjust: @escaping @Sendable (inout ServiceConfiguration) -> Void = { _ in },
    _ body: @Sendable (ServiceClient, _ apns: MockAPNsState, _ fcm: MockFCMState) async throws -> T
) async throws -> T {
    try await withMockFCM { fcmURL, fcm in
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let accountFile = directory.appendingPathComponent("service-account.json").path
        let caFile = directory.appendingPathComponent("ca.pem").path
        try Data(fcmAccount(base: fcmURL).json).write(to: URL(fileURLWithPath: accountFile))
        try Data(localCAPEM.utf8).write(to: URL(fileURLWithPath: caFile))
        return try await withDelivery({ configuration in
            configuration.delivery.fcmServiceAccountFile = accountFile
            configuration.delivery.fcmURL = fcmURL
            configuration.delivery.fcmCAFile = caFile
            adjust(&configuration)
        }) { client, sandbox, _ in try await body(client, sandbox, fcm) }
    }
}

func registerFCM(
    _ client: ServiceClient, _ device: String, _ token: String, topic: String = "com.example.app"
) async throws -> ServiceClient.Reply {
    try await client.put("/v1/devices/\(device)/fcm-tokens/\(token)", json: #"{"topic":"\#(topic)"}"#)
}

/// A JSON string literal of `text`, escaped by hand (quotes, backslashes and newlines are all the bodies hold).
private func quoted(_ text: String) -> String {
    "\""
        + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        .replacingOccurrences(of: "\n", with: "\\n") + "\""
}

@Suite("Android delivery through FCM", .serialized)
struct AndroidDeliveryTests {
    @Test("FCM registrations: created then refreshed, listed apart from APNs ones, removed; bad ones say why")
    func registrations() async throws {
        try await withService { client in
            let token = fcmToken(1)
            let created = try await registerFCM(client, "phone", token)
            #expect(created.status == 201, "\(created.text)")
            #expect(created.json?["environment"] == .string("fcm"))
            #expect(created.json?["platform"] == .string("android"))
            #expect(try await registerFCM(client, "phone", token).status == 200)
            _ = try await register(client, "phone", deviceToken(5))
            let android = try await client.get("/v1/devices/phone/fcm-tokens")
            #expect(android.json?["tokens"]?[0]?["token"] == .string(token))
            #expect(android.json?["tokens"]?[1] == nil)
            let ios = try await client.get("/v1/devices/phone/apns-tokens")
            #expect(ios.json?["tokens"]?[0]?["platform"] == .string("ios"))
            #expect(ios.json?["tokens"]?[1] == nil)
            let bad = try await client.put(
                "/v1/devices/phone/fcm-tokens/bad%20token", json: #"{"topic":"com.example.app"}"#)
            #expect(bad.status == 400)
            #expect(bad.text.contains("letters, digits, '-', '_' and ':'"))
            let withEnvironment = try await client.put(
                "/v1/devices/phone/fcm-tokens/\(token)", json: #"{"topic":"com.example.app","environment":"sandbox"}"#)
            #expect(withEnvironment.status == 400)
            #expect(withEnvironment.text.contains("environment"))
            let fcmAsAPNs = try await register(client, "phone", deviceToken(6), environment: "fcm")
            #expect(fcmAsAPNs.status == 400)
            #expect(fcmAsAPNs.text.contains("fcm-tokens"))
            #expect(try await client.delete("/v1/devices/phone/fcm-tokens/\(token)").status == 200)
            #expect(try await client.delete("/v1/devices/phone/fcm-tokens/\(token)").status == 404)
        }
    }

    @Test("a push to an iPhone and an Android phone: each enriched alike, the Android message checked byte for byte")
    func twoPlatforms() async throws {
        try await withAndroidDelivery { client, apns, fcm in
            try await reportFix(client, "iphone", lat: 51.52078, lng: -0.12696)
            try await reportFix(client, "pixel", lat: 51.52078, lng: -0.12696)
            _ = try await register(client, "iphone", deviceToken(1))
            #expect(try await registerFCM(client, "pixel", fcmToken(1)).status == 201)
            let now = Int64(Date().timeIntervalSince1970)
            let payload =
                #"{"aps":{"alert":{"title":"Hello","subtitle":"Sub","body":"Original"},"mutable-content":1,"#
                + #""category":"location","timestamp":\#(now)},"order":{"id":42},"kind":"nearby"}"#
            let reply = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["iphone", "pixel"], payload: payload,
                    extra: #""priority":10,"collapse_id":"nearby-42","expiration":\#(now + 600)"#))
            #expect(reply.status == 200, "\(reply.text)")
            #expect(reply.json?["counts"]?["delivered"] == .int(2), "\(reply.text)")
            let byDevice = devices(reply)
            #expect(byDevice["pixel"]?["outcome"] == .string("enriched"))
            #expect(firstDelivery(byDevice["pixel"])?["environment"] == .string("fcm"))
            #expect(firstDelivery(byDevice["pixel"])?["status"] == .int(200))

            let twin = try #require(payloads(apns, token: deviceToken(1)).first)
            let body = try #require(twin["aps"]?["alert"]?["body"]?.stringValue)
            #expect(body == "British Museum is 150 m away in London")
            let map = try #require(twin["attachment-url"]?.stringValue)
            let received = fcm.received
            #expect(received.count == 1)
            let sent = try #require(received.first)
            #expect(sent.project == "demo-project")
            // Written here from the iPhone's payload: the alert as notification (the subtitle in data), the map as
            // the image, custom keys as strings, sorted keys; priority 10 is HIGH, the expiration a ttl.
            let ttl = try #require(sent.message["android"]?["ttl"]?.stringValue)
            let seconds = try #require(Int64(ttl.dropLast()))
            #expect((590...600).contains(seconds))
            let expected =
                #"{"message":{"android":{"collapse_key":"nearby-42","notification":{"click_action":"location"},"#
                + #""priority":"HIGH","ttl":"\#(ttl)"},"data":{"kind":"nearby","order":"{\"id\":42}","subtitle":"Sub"},"#
                + #""notification":{"body":\#(quoted(body)),"image":\#(quoted(map)),"title":"Hello"},"#
                + #""token":"\#(fcmToken(1))"}}"#
            #expect(String(decoding: sent.body, as: UTF8.self) == expected)
        }
    }

    @Test(
        "UNREGISTERED deactivates the Android registration; a background push is a data-only message",
        arguments: Backend.allCases)
    func tokenHygieneAndDataOnly(backend: Backend) async throws {
        let url = try await BigPushTests.databaseURL(backend)
        try await withAndroidDelivery({ $0.databaseURL = url }) { client, _, fcm in
            fcm.script(fcmToken(2), MockFCMScript(errorCode: .unregistered))
            fcm.script(fcmToken(4), MockFCMScript(errorCode: .invalidArgument))
            fcm.script(fcmToken(5), MockFCMScript(errorCode: .senderIDMismatch))
            _ = try await registerFCM(client, "gone", fcmToken(2))
            _ = try await registerFCM(client, "broken", fcmToken(4))
            _ = try await registerFCM(client, "elsewhere", fcmToken(5))
            _ = try await registerFCM(client, "quiet", fcmToken(3))
            let failed = try await client.post("/v1/push", json: pushBody(devices: ["gone"]))
            let delivery = firstDelivery(devices(failed)["gone"])
            #expect(delivery?["state"] == .string("failed"), "\(failed.text)")
            #expect(delivery?["status"] == .int(404))
            #expect(delivery?["reason"] == .string("UNREGISTERED"))
            #expect(failed.json?["platforms"]?["android"]?["failed"] == .int(1), "\(failed.text)")
            #expect(failed.json?["platforms"]?["ios"]?["failed"] == .int(0))
            let listed = try await client.get("/v1/devices/gone/fcm-tokens")
            #expect(listed.json?["tokens"]?[0]?["active"] == .bool(false))
            #expect(listed.json?["tokens"]?[0]?["reason"] == .string("UNREGISTERED"))
            // An INVALID_ARGUMENT about the token deactivates too; SENDER_ID_MISMATCH fails without deactivating.
            let more = try await client.post("/v1/push", json: pushBody(devices: ["broken", "elsewhere"]))
            #expect(firstDelivery(devices(more)["broken"])?["reason"] == .string("INVALID_ARGUMENT"), "\(more.text)")
            #expect(firstDelivery(devices(more)["elsewhere"])?["state"] == .string("failed"))
            #expect(firstDelivery(devices(more)["elsewhere"])?["reason"] == .string("SENDER_ID_MISMATCH"))
            let broken = try await client.get("/v1/devices/broken/fcm-tokens")
            #expect(broken.json?["tokens"]?[0]?["active"] == .bool(false))
            let elsewhere = try await client.get("/v1/devices/elsewhere/fcm-tokens")
            #expect(elsewhere.json?["tokens"]?[0]?["active"] == .bool(true))

            let background = try await client.post(
                "/v1/push",
                json:
                    #"{"device_ids":["quiet"],"push_type":"background","payload":{"aps":{"content-available":1},"sync":"now"}}"#
            )
            #expect(background.json?["counts"]?["delivered"] == .int(1), "\(background.text)")
            let message = try #require(fcm.received.last?.message)
            #expect(message["notification"] == nil)
            #expect(message["data"] == .object(["sync": .string("now")]))
            #expect(message["android"]?["priority"] == .string("NORMAL"))
        }
    }

    @Test("an FCM URL that answers 404 (a wrong URL or project) deactivates nothing: the deliveries wait")
    func wrongURLWaits() async throws {
        try await withAndroidDelivery({ $0.delivery.fcmURL += "/nowhere" }) { client, _, _ in
            _ = try await registerFCM(client, "pixel", fcmToken(31))
            let reply = try await client.post("/v1/push", json: pushBody(devices: ["pixel"], extra: #""wait":false"#))
            let id = try #require(reply.json?["push_id"]?.stringValue)
            var report = try await client.get("/v1/push/\(id)?wait=2")
            for _ in 0..<50 where report.json?["waiting"]?[0] == nil {
                try await Task.sleep(for: .milliseconds(100))
                report = try await client.get("/v1/push/\(id)")
            }
            #expect(report.json?["waiting"]?[0]?["status"] == .int(404), "\(report.text)")
            #expect(report.json?["counts"]?["pending"] == .int(1))
            let listed = try await client.get("/v1/devices/pixel/fcm-tokens")
            #expect(listed.json?["tokens"]?[0]?["active"] == .bool(true))
        }
    }

    @Test("a service account FCM's token endpoint refuses: Android deliveries wait and say why, iOS ones go")
    func refusedCredentialWaits() async throws {
        try await withAndroidDelivery { client, apns, fcm in
            fcm.setRefuseTokens(true)
            _ = try await register(client, "iphone", deviceToken(9))
            _ = try await registerFCM(client, "pixel", fcmToken(9))
            let reply = try await client.post(
                "/v1/push", json: pushBody(devices: ["iphone", "pixel"], extra: #""wait":false"#))
            #expect(reply.status == 202 || reply.status == 200)
            let id = try #require(reply.json?["push_id"]?.stringValue)
            var report = try await client.get("/v1/push/\(id)?wait=2")
            for _ in 0..<50 where report.json?["waiting"]?[0] == nil {
                try await Task.sleep(for: .milliseconds(100))
                report = try await client.get("/v1/push/\(id)")
            }
            // The report groups what waits by why: one delivery, FCM's 401, the token endpoint's refusal.
            let waiting = report.json?["waiting"]?[0]
            #expect(report.json?["counts"]?["pending"] == .int(1), "\(report.text)")
            #expect(waiting?["status"] == .int(401))
            #expect(waiting?["reason"] == .string("UNAUTHENTICATED"))
            #expect(waiting?["error"]?.stringValue?.hasPrefix("waiting for FCM") == true, "\(report.text)")
            #expect(waiting?["error"]?.stringValue?.contains("refused the service account") == true)
            #expect(payloads(apns, token: deviceToken(9)).count == 1)
            #expect(fcm.counts.messages == 0)
            // The credential is fixed: the waiting delivery goes at the circuit's next probe.
            fcm.setRefuseTokens(false)
            let done = try await client.get("/v1/push/\(id)?wait=20")
            #expect(done.json?["counts"]?["delivered"] == .int(2), "\(done.text)")
            #expect(fcm.counts.accepted == 1)
        }
    }

    @Test("an app of the apps file with only a service account sends to its Android devices; its iPhones say why not")
    func androidOnlyApp() async throws {
        try await withAndroidDelivery({ configuration in
            // Beside the default app (ENRICH_APNS_* and ENRICH_FCM_SERVICE_ACCOUNT_FILE), an app with no APNs
            // credential, its service account the same file under another name.
            let account = configuration.delivery.fcmServiceAccountFile ?? ""
            let appsFile = URL(fileURLWithPath: account).deletingLastPathComponent().appendingPathComponent("apps.json")
            try? #"""
            {"credentials": {"droid-firebase": {"service_account_file": "\#(account)"}},
             "apps": [{"id": "droid", "bundle_id": "com.example.droid", "fcm_credential": "droid-firebase"}]}
            """#.write(to: appsFile, atomically: true, encoding: .utf8)
            configuration.delivery.appsFile = appsFile.path
        }) { client, apns, fcm in
            let droid = ["Enrich-App": "droid"]
            let pixel = try await client.put(
                "/v1/devices/pixel/fcm-tokens/\(fcmToken(41))", json: #"{"topic":"com.example.droid"}"#, headers: droid)
            #expect(pixel.status == 201, "\(pixel.text)")
            let iphone = try await register(
                client, "iphone", deviceToken(41), topic: "com.example.droid", headers: droid)
            #expect(iphone.status == 201, "\(iphone.text)")
            let reply = try await client.post(
                "/v1/push", json: pushBody(devices: ["pixel", "iphone"]), headers: droid)
            #expect(reply.json?["counts"]?["delivered"] == .int(1), "\(reply.text)")
            #expect(reply.json?["counts"]?["failed"] == .int(1), "\(reply.text)")
            let byDevice = devices(reply)
            #expect(firstDelivery(byDevice["pixel"])?["status"] == .int(200))
            let refusal = firstDelivery(byDevice["iphone"])?["error"]?.stringValue ?? ""
            #expect(refusal.contains("app 'droid' has no APNs credential"), "\(reply.text)")
            #expect(fcm.received.map(\.message["token"]?.stringValue) == [fcmToken(41)])
            #expect(payloads(apns, token: deviceToken(41)).isEmpty)
        }
    }

    @Test("an audience reaches both platforms, and an Android phone's receipt confirms its push")
    func audienceAndReceipt() async throws {
        try await withAndroidDelivery { client, apns, fcm in
            try await reportFix(client, "iphone", lat: 48.8584, lng: 2.2945)
            try await reportFix(client, "pixel", lat: 48.8585, lng: 2.2946)
            try await reportFix(client, "far", lat: 45.76, lng: 4.84)
            _ = try await register(client, "iphone", deviceToken(21))
            _ = try await registerFCM(client, "pixel", fcmToken(21))
            _ = try await registerFCM(client, "far", fcmToken(22))
            let now = Int64(Date().timeIntervalSince1970)
            let reply = try await client.post(
                "/v1/push",
                json: #"{"audience":{"near":{"latitude":48.8584,"longitude":2.2945,"radius_m":1000}},"#
                    + #""payload":\#(locationPayload(timestamp: String(now))),"wait":true}"#)
            let id = try #require(reply.json?["push_id"]?.stringValue, "\(reply.text)")
            let done = try await client.get("/v1/push/\(id)?wait=20")
            #expect(done.json?["counts"]?["delivered"] == .int(2), "\(done.text)")
            #expect(done.json?["platforms"]?["android"]?["delivered"] == .int(1), "\(done.text)")
            #expect(done.json?["platforms"]?["ios"]?["delivered"] == .int(1))
            #expect(done.json?["platforms"]?["android"]?["pending"] == .int(0))
            #expect(payloads(apns, token: deviceToken(21)).count == 1)
            #expect(fcm.received.map(\.token) == [fcmToken(21)])
            let receipt = try await client.post(
                "/v1/receipts", json: #"{"push_id":"\#(id)","device_id":"pixel"}"#)
            #expect(receipt.status == 201, "\(receipt.text)")
            let report = try await client.get("/v1/push/\(id)")
            #expect(report.json?["summary"]?["confirmed"] == .int(1), "\(report.text)")
        }
    }

    @Test(
        "per-platform counts follow a cancel and a device's deletion, on both stores", arguments: Backend.allCases)
    func platformCountsMove(backend: Backend) async throws {
        let url = try await BigPushTests.databaseURL(backend)
        try await withAndroidDelivery({ $0.databaseURL = url }) { client, _, fcm in
            _ = try await registerFCM(client, "pixel-a", fcmToken(41))
            _ = try await registerFCM(client, "pixel-b", fcmToken(42))
            _ = try await register(client, "iphone", deviceToken(41))
            let later = Int64(Date().timeIntervalSince1970) + 3600
            let reply = try await client.post(
                "/v1/push",
                json: pushBody(devices: ["pixel-a", "pixel-b", "iphone"], extra: #""send_at":\#(later)"#))
            let id = try #require(reply.json?["push_id"]?.stringValue, "\(reply.text)")
            let scheduled = try await client.get("/v1/push/\(id)")
            #expect(scheduled.json?["platforms"]?["android"]?["pending"] == .int(2), "\(scheduled.text)")
            #expect(scheduled.json?["platforms"]?["ios"]?["pending"] == .int(1))
            #expect(try await client.delete("/v1/devices/pixel-b").status == 200)
            let fewer = try await client.get("/v1/push/\(id)")
            #expect(fewer.json?["platforms"]?["android"]?["pending"] == .int(1), "\(fewer.text)")
            #expect(try await client.post("/v1/push/\(id)/cancel", json: "{}").status == 200)
            var cancelled = try await client.get("/v1/push/\(id)")
            for _ in 0..<100 where cancelled.json?["counts"]?["pending"] != .int(0) {
                try await Task.sleep(for: .milliseconds(100))
                cancelled = try await client.get("/v1/push/\(id)")
            }
            #expect(cancelled.json?["platforms"]?["android"]?["cancelled"] == .int(1), "\(cancelled.text)")
            #expect(cancelled.json?["platforms"]?["ios"]?["cancelled"] == .int(1))
            #expect(cancelled.json?["platforms"]?["android"]?["pending"] == .int(0))
            #expect(fcm.counts.messages == 0)
        }
    }
}
