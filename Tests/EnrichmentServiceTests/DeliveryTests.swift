import APNsCore
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import Synchronization
import TestSupport
import Testing

/// The real service with delivery configured against two real mocks (sandbox and production) over HTTP/2 + TLS.
func withDelivery<T: Sendable>(
    clock: any WallClock = SystemWallClock(),
    _ adjust: @escaping @Sendable (inout ServiceConfiguration) -> Void = { _ in },
    _ body: @Sendable (ServiceClient, _ sandbox: MockAPNsState, _ production: MockAPNsState) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("delivery-\(UUID().uuidString)")
    let (keyFile, caFile) = try writeMockCredentials(into: directory)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await withMock { sandboxURL, sandbox in
        try await withMock { productionURL, production in
            try await withService(
                { configuration in
                    deliverToMock(
                        &configuration, keyFile: keyFile, caFile: caFile, sandbox: sandboxURL,
                        production: productionURL)
                    configuration.delivery.retryDelay = 0.05
                    configuration.delivery.attempts = 3
                    adjust(&configuration)
                }, clock: clock
            ) { client in try await body(client, sandbox, production) }
        }
    }
}

/// A distinct, valid token per label.
func deviceToken(_ label: Int, digits: Int = 64) -> String {
    let hex = String(label, radix: 16)
    return String(repeating: "0", count: digits - hex.count) + hex
}

func register(
    _ client: ServiceClient, _ device: String, _ token: String, environment: String = "sandbox",
    topic: String = "com.example.app", headers: [String: String] = [:]
) async throws -> ServiceClient.Reply {
    try await client.put(
        "/v1/devices/\(device)/apns-tokens/\(token)", json: #"{"topic":"\#(topic)","environment":"\#(environment)"}"#,
        headers: headers)
}

func reportFix(_ client: ServiceClient, _ device: String, lat: Double, lng: Double) async throws {
    let now = Int64(Date().timeIntervalSince1970)
    let reply = try await client.post(
        "/v1/devices/\(device)/locations",
        json: #"{"locations":[{"latitude":\#(lat),"longitude":\#(lng),"utc_timestamp":\#(now - 5)}]}"#)
    #expect(reply.status == 200)
}

func pushBody(
    devices: [String], payload: String = locationPayload(timestamp: String(Int64(Date().timeIntervalSince1970))),
    extra: String = ""
) -> String {
    let ids = devices.map { #""\#($0)""# }.joined(separator: ",")
    return #"{"device_ids":[\#(ids)],"payload":\#(payload)\#(extra.isEmpty ? "" : "," + extra)}"#
}

/// The devices of a push answer, by id.
func devices(_ reply: ServiceClient.Reply) -> [String: JSONValue] {
    guard case .array(let items)? = reply.json?["devices"] else { return [:] }
    return Dictionary(
        uniqueKeysWithValues: items.compactMap { item in item["device_id"]?.stringValue.map { ($0, item) } })
}

func firstDelivery(_ device: JSONValue?) -> JSONValue? {
    guard case .array(let items)? = device?["deliveries"] else { return nil }
    return items.first
}

func payloads(_ state: MockAPNsState, token: String) -> [JSONValue] {
    state.receivedPushes.filter { $0.deviceToken == token }.compactMap { try? JSONValue.decode(Data($0.payload)) }
}

@Suite("Delivery: registrations, enrich-and-send, token hygiene", .serialized)
struct DeliveryTests {
    @Test("registering: created then refreshed, lower-cased, listed, removed; bad tokens say what is accepted")
    func registrations() async throws {
        let clock = ManualClock()
        try await withService(clock: clock) { client in
            let upper = String(repeating: "AB", count: 50)
            let created = try await register(client, "dev-1", upper)
            #expect(created.status == 201)
            #expect(created.json?["token"]?.stringValue == upper.lowercased())
            let first = created.json?["registered_at"]?.lenientDouble ?? 0
            clock.advance(60)
            let refreshed = try await register(client, "dev-1", upper.lowercased(), environment: "production")
            #expect(refreshed.status == 200)
            #expect((refreshed.json?["registered_at"]?.lenientDouble ?? 0) >= first + 60)
            _ = try await register(client, "dev-1", deviceToken(7))
            let list = try await client.get("/v1/devices/dev-1/apns-tokens")
            guard case .array(let tokens)? = list.json?["tokens"] else {
                Issue.record("no tokens array: \(list.text)")
                return
            }
            #expect(tokens.count == 2)
            let long = tokens.first { $0["token"]?.stringValue == upper.lowercased() }
            #expect(long?["environment"] == .string("production"))
            #expect(long?["active"] == .bool(true))

            for bad in [
                String(repeating: "a", count: 63), String(repeating: "a", count: 62),
                String(repeating: "a", count: 202), String(repeating: "g", count: 64),
            ] {
                let reply = try await register(client, "dev-1", bad)
                #expect(reply.status == 400)
                #expect(reply.errorReason == "invalid_token")
            }
            let short = try await register(client, "dev-1", String(repeating: "a", count: 62))
            #expect(short.json?["error"]?["message"]?.stringValue?.contains("64 to 200") == true)
            let noEnvironment = try await client.put(
                "/v1/devices/dev-1/apns-tokens/\(deviceToken(8))", json: #"{"topic":"com.example.app"}"#)
            #expect(noEnvironment.status == 400)
            #expect(noEnvironment.json?["error"]?["field"] == .string("environment"))

            let removed = try await client.delete("/v1/devices/dev-1/apns-tokens/\(deviceToken(7))")
            #expect(removed.status == 200)
            let again = try await client.delete("/v1/devices/dev-1/apns-tokens/\(deviceToken(7))")
            #expect(again.status == 404)
            let device = try await client.delete("/v1/devices/dev-1")
            #expect(device.json?["deleted_tokens"] == .int(1))
            let empty = try await client.get("/v1/devices/dev-1/apns-tokens")
            #expect(empty.json?["tokens"] == .array([]))
        }
    }

    @Test("each device gets its own enrichment, sent to each of its active tokens; outcomes per device")
    func enrichAndSend() async throws {
        try await withDelivery { client, sandbox, _ in
            // 0.00135° north of the British Museum (about 150 m), and on the Eiffel Tower itself (sample POIs).
            try await reportFix(client, "london", lat: 51.52078, lng: -0.12696)
            try await reportFix(client, "paris", lat: 48.85837, lng: 2.29448)
            _ = try await register(client, "london", deviceToken(1))
            _ = try await register(client, "london", deviceToken(2, digits: 128))
            _ = try await register(client, "paris", deviceToken(3))
            _ = try await register(client, "nofix", deviceToken(4))
            let payload = locationPayload(timestamp: String(Int64(Date().timeIntervalSince1970)))
            let reply = try await client.post(
                "/v1/push", json: pushBody(devices: ["london", "paris", "nofix", "unknown"], payload: payload))
            #expect(reply.status == 200)
            #expect(reply.json?["done"] == .bool(true))
            #expect(reply.json?["counts"]?["delivered"] == .int(4))
            let byDevice = devices(reply)
            #expect(byDevice["london"]?["outcome"] == .string("enriched"))
            #expect(byDevice["paris"]?["outcome"] == .string("enriched"))
            #expect(byDevice["nofix"]?["outcome"] == .string("no_fix"))
            #expect(byDevice["unknown"]?["outcome"] == .string("not_sent"))
            #expect(byDevice["unknown"]?["rule"] == .string("no_active_token"))
            #expect(firstDelivery(byDevice["paris"])?["status"] == .int(200))
            #expect(firstDelivery(byDevice["paris"])?["attempts"] == .int(1))

            // What each phone received, written here from the fix and the POI (docs/RULES.md: the default template
            // `{{name}} is {{distance}} away in {{city}}`, tens of metres from 100 m; DESIGN.md's map markers: the
            // user's `%f` coordinates in red, the POI's as Swift prints them in blue, `|` as %7C).
            let expected = [
                (
                    deviceToken(1), "British Museum is 150 m away in London",
                    ["markers=color:red%7C51.520780,-0.126960", "markers=color:blue%7C51.51943,-0.12696"]
                ),
                (
                    deviceToken(2, digits: 128), "British Museum is 150 m away in London",
                    ["markers=color:red%7C51.520780,-0.126960", "markers=color:blue%7C51.51943,-0.12696"]
                ),
                (
                    deviceToken(3), "Eiffel Tower is 0 m away in Paris",
                    ["markers=color:red%7C48.858370,2.294480", "markers=color:blue%7C48.85837,2.29448"]
                ),
            ]
            for (token, body, markers) in expected {
                let received = payloads(sandbox, token: token)
                #expect(received.count == 1)
                #expect(received.first?["aps"]?["alert"]?["body"] == .string(body), "\(received)")
                let map = received.first?["attachment-url"]?.stringValue ?? ""
                for marker in markers { #expect(map.contains(marker), "\(map)") }
            }
            let londonBody = payloads(sandbox, token: deviceToken(1)).first?["aps"]?["alert"]?["body"]
            let parisBody = payloads(sandbox, token: deviceToken(3)).first?["aps"]?["alert"]?["body"]
            #expect(londonBody != parisBody)
            // No fix: delivered with its original content.
            #expect(payloads(sandbox, token: deviceToken(4)).first?["aps"]?["alert"]?["body"] == .string("Original"))
            // apns-id sent is the one reported.
            let sentID = sandbox.receivedPushes.first { $0.deviceToken == deviceToken(3) }?.apnsID
            #expect(firstDelivery(byDevice["paris"])?["apns_id"]?.stringValue == sentID)
        }
    }

    @Test("a batch's last answer is written at once, not at the next write interval")
    func lastAnswerWrittenAtOnce() async throws {
        // With a write interval longer than the wait, the push could only be done in time if the last answer is
        // written as soon as it arrives.
        try await withDelivery({ $0.delivery.recordInterval = 120 }) { client, _, _ in
            for index in 0..<3 {
                try await reportFix(client, "device-\(index)", lat: 48.8584, lng: 2.2945)
                _ = try await register(client, "device-\(index)", deviceToken(100 + index))
            }
            let started = ContinuousClock.now
            let reply = try await client.post(
                "/v1/push", json: pushBody(devices: ["device-0", "device-1", "device-2"], extra: #""wait":true"#))
            #expect(reply.status == 200)
            #expect(reply.json?["done"] == .bool(true))
            #expect(reply.json?["counts"]?["delivered"] == .int(3))
            #expect(ContinuousClock.now - started < .seconds(20))
        }
    }

    @Test("sandbox registrations go to the sandbox host, production ones to the production host")
    func environments() async throws {
        try await withDelivery { client, sandbox, production in
            _ = try await register(client, "both", deviceToken(10), environment: "sandbox")
            _ = try await register(client, "both", deviceToken(11), environment: "production")
            let reply = try await client.post("/v1/push", json: pushBody(devices: ["both"]))
            #expect(reply.json?["counts"]?["delivered"] == .int(2))
            #expect(sandbox.receivedPushes.map(\.deviceToken) == [deviceToken(10)])
            #expect(production.receivedPushes.map(\.deviceToken) == [deviceToken(11)])
        }
    }

    @Test("a stale payload is sent as the phone would show it (woosmap: OUT OF TIME), outcome stale")
    func stale() async throws {
        try await withDelivery { client, sandbox, _ in
            _ = try await register(client, "late", deviceToken(20))
            let old = Int64(Date().timeIntervalSince1970) - 301
            let reply = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["late"], payload: locationPayload(timestamp: String(old)), extra: #""mode":"woosmap""#))
            let device = devices(reply)["late"]
            #expect(device?["outcome"] == .string("stale"))
            #expect(device?["rule"] == .string("older_than_window"))
            #expect(
                payloads(sandbox, token: deviceToken(20)).first?["aps"]?["alert"]?["body"] == .string("OUT OF TIME"))
        }
    }

    @Test(
        "429 is retried with backoff; 503 and 500 pause the peer and wait (counted, never failed: expired after the maximum age); a permanent failure is not retried"
    )
    func retries() async throws {
        try await withDelivery({
            $0.delivery.maximumAge = 2
            $0.delivery.probeInterval = 0.2
        }) { client, sandbox, _ in
            sandbox.script(FailureScript(status: 429, times: 1), for: deviceToken(30))
            sandbox.script(FailureScript(status: 503, times: 2), for: deviceToken(31))
            sandbox.script(FailureScript(status: 500), for: deviceToken(32))
            sandbox.script(FailureScript(status: 413), for: deviceToken(33))
            for (index, token) in (30...33).enumerated() {
                _ = try await register(client, "r\(index)", deviceToken(token))
            }
            let reply = try await client.post("/v1/push", json: pushBody(devices: ["r0", "r1", "r2", "r3"]))
            let byDevice = devices(reply)
            #expect(firstDelivery(byDevice["r0"])?["state"] == .string("delivered"))
            #expect(firstDelivery(byDevice["r0"])?["attempts"] == .int(2))
            #expect(firstDelivery(byDevice["r1"])?["state"] == .string("delivered"))
            #expect(firstDelivery(byDevice["r1"])?["attempts"] == .int(3))
            // APNs answering 500 every time is an outage, not the device's fault: it waits until the push's
            // maximum age, each probe that reached the peer counted, and ends expired.
            #expect(firstDelivery(byDevice["r2"])?["state"] == .string("expired"))
            #expect(firstDelivery(byDevice["r2"])?["status"] == .int(500))
            let probes = sandbox.receivedPushes.filter { $0.deviceToken == deviceToken(32) }.count
            #expect(probes >= 3)
            #expect(firstDelivery(byDevice["r2"])?["attempts"] == .int(Int64(probes)))
            #expect(firstDelivery(byDevice["r3"])?["state"] == .string("failed"))
            #expect(firstDelivery(byDevice["r3"])?["reason"] == .string("PayloadTooLarge"))
            #expect(firstDelivery(byDevice["r3"])?["attempts"] == .int(1))
            #expect(sandbox.receivedPushes.filter { $0.deviceToken == deviceToken(33) }.count == 1)
        }
    }

    @Test("410 deactivates a token only when it was not registered again after the 410's timestamp")
    func unregistered() async throws {
        try await withRecordingWebhook { hook, webhook in
            try await withDelivery({ $0.delivery.feedbackURL = hook }) { client, sandbox, _ in
                let now = Date().timeIntervalSince1970
                // Registered before the app was removed: deactivated.
                sandbox.script(
                    FailureScript(status: 410, reason: "Unregistered", timestamp: Int64((now + 100) * 1000)),
                    for: deviceToken(40))
                // APNs's timestamp predates the latest registration (the app was reinstalled): kept.
                sandbox.script(
                    FailureScript(status: 410, reason: "Unregistered", timestamp: Int64((now - 100) * 1000)),
                    for: deviceToken(41))
                _ = try await register(client, "gone", deviceToken(40))
                _ = try await register(client, "back", deviceToken(41))
                let reply = try await client.post("/v1/push", json: pushBody(devices: ["gone", "back"]))
                #expect(firstDelivery(devices(reply)["gone"])?["status"] == .int(410))
                #expect(firstDelivery(devices(reply)["gone"])?["timestamp"] == .int(Int64((now + 100) * 1000)))
                #expect(firstDelivery(devices(reply)["gone"])?["attempts"] == .int(1))

                let gone = try await client.get("/v1/devices/gone/apns-tokens").json?["tokens"]?[0]
                #expect(gone?["active"] == .bool(false))
                #expect(gone?["reason"] == .string("Unregistered"))
                #expect(gone?["invalidated_at"]?.lenientDouble == (Double(Int64((now + 100) * 1000)) / 1000))
                let back = try await client.get("/v1/devices/back/apns-tokens").json?["tokens"]?[0]
                #expect(back?["active"] == .bool(true))

                // Later pushes skip the inactive token.
                sandbox.clearReceived()
                let later = try await client.post("/v1/push", json: pushBody(devices: ["gone", "back"]))
                #expect(devices(later)["gone"]?["outcome"] == .string("not_sent"))
                #expect(sandbox.receivedPushes.map(\.deviceToken) == [deviceToken(41)])

                // The webhook heard about the deactivation (and only that one).
                let deadline = Date().addingTimeInterval(10)
                while webhook.bodies.withLock({ $0.isEmpty }), Date() < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                let events = webhook.bodies.withLock { $0 }
                #expect(events.count == 1)
                #expect(events.first?["token"] == .string(deviceToken(40)))
                #expect(events.first?["reason"] == .string("Unregistered"))
                #expect(events.first?["device_id"] == .string("gone"))
            }
        }
    }

    @Test("BadDeviceToken and DeviceTokenNotForTopic deactivate that registration; a refreshed one is kept")
    func badTokens() async throws {
        try await withDelivery { client, sandbox, _ in
            sandbox.script(FailureScript(status: 400, reason: "BadDeviceToken"), for: deviceToken(50))
            sandbox.script(FailureScript(status: 400, reason: "DeviceTokenNotForTopic"), for: deviceToken(51))
            _ = try await register(client, "bad", deviceToken(50))
            _ = try await register(client, "other-app", deviceToken(51))
            let reply = try await client.post("/v1/push", json: pushBody(devices: ["bad", "other-app"]))
            #expect(firstDelivery(devices(reply)["bad"])?["reason"] == .string("BadDeviceToken"))
            let bad = try await client.get("/v1/devices/bad/apns-tokens").json?["tokens"]?[0]
            #expect(bad?["active"] == .bool(false))
            #expect(bad?["reason"] == .string("BadDeviceToken"))
            let other = try await client.get("/v1/devices/other-app/apns-tokens").json?["tokens"]?[0]
            #expect(other?["active"] == .bool(false))
            #expect(other?["reason"] == .string("DeviceTokenNotForTopic"))
            // Registering again (e.g. with the right environment) makes it active again.
            _ = try await register(client, "bad", deviceToken(50), environment: "production")
            let again = try await client.get("/v1/devices/bad/apns-tokens").json?["tokens"]?[0]
            #expect(again?["active"] == .bool(true))
            #expect(again?["reason"] == nil)
        }
    }

    @Test("the feedback webhook is retried after a refusal, and sending does not wait for it")
    func webhookRetry() async throws {
        let webhook = RecordingWebhook()
        try await webhook.run { base in
            try await withDelivery({ $0.delivery.feedbackURL = base + "/fail-once" }) { client, sandbox, _ in
                sandbox.script(FailureScript(status: 400, reason: "BadDeviceToken"), for: deviceToken(55))
                _ = try await register(client, "hooked", deviceToken(55))
                let reply = try await client.post("/v1/push", json: pushBody(devices: ["hooked"]))
                #expect(firstDelivery(devices(reply)["hooked"])?["state"] == .string("failed"))
                // The answer came before the webhook's retry (0.5 s after its refusal) could have been made.
                #expect(webhook.bodies.withLock { $0.isEmpty })
                let deadline = Date().addingTimeInterval(10)
                while webhook.bodies.withLock({ $0.isEmpty }), Date() < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(webhook.refused.withLock { $0 } == 1)
                let events = webhook.bodies.withLock { $0 }
                #expect(events.count == 1)
                #expect(events.first?["reason"] == .string("BadDeviceToken"))
                #expect(events.first?["environment"] == .string("sandbox"))
            }
        }
    }

    @Test("a webhook answering a redirect is not followed: the event goes to the configured URL on a later attempt")
    func webhookRedirectNotFollowed() async throws {
        let webhook = RecordingWebhook()
        try await webhook.run { base in
            try await withDelivery({ $0.delivery.feedbackURL = base + "/redirect-once" }) { client, sandbox, _ in
                sandbox.script(FailureScript(status: 400, reason: "BadDeviceToken"), for: deviceToken(56))
                _ = try await register(client, "redirected", deviceToken(56))
                _ = try await client.post("/v1/push", json: pushBody(devices: ["redirected"]))
                let deadline = Date().addingTimeInterval(10)
                while webhook.bodies.withLock({ $0.isEmpty }), Date() < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(webhook.refused.withLock { $0 } == 1, "the first attempt got the 307")
                #expect(webhook.bodies.withLock { $0.count } == 1, "the retry reached the configured URL")
                // Give a followed redirect time to arrive, were one made.
                try await Task.sleep(for: .milliseconds(300))
                #expect(webhook.stolen.withLock { $0.isEmpty }, "the redirect's target got the event")
            }
        }
    }

    @Test("with a remote places API a batch's devices are enriched side by side, not one slow call after another")
    func remotePlacesConcurrently() async throws {
        let places = FakePlacesAPI()
        try await places.run { base in
            try await withDelivery({
                $0.places = .woosmap
                $0.woosmapBaseURL = base + "/slow"
                $0.deadline = 0.5
            }) { client, sandbox, _ in
                let ids = (0..<40).map { "slow-\($0)" }
                for (index, id) in ids.enumerated() {
                    try await reportFix(client, id, lat: 43.6, lng: 3.88)
                    _ = try await register(client, id, deviceToken(200 + index))
                }
                let started = ContinuousClock.now
                let reply = try await client.post("/v1/push", json: pushBody(devices: ids))
                let elapsed = ContinuousClock.now - started
                #expect(reply.json?["counts"]?["delivered"] == .int(40))
                #expect(devices(reply).values.allSatisfy { $0["outcome"] == .string("degraded") })
                #expect(sandbox.receivedCount == 40)
                // One after another, 40 devices at a 0.5 s deadline each would take 20 s.
                #expect(elapsed < .seconds(8), "took \(elapsed)")
            }
        }
    }

    @Test("a delivery whose apns-expiration has passed is marked expired and never sent")
    func expired() async throws {
        try await withDelivery { client, sandbox, _ in
            _ = try await register(client, "exp", deviceToken(60))
            let past = Int64(Date().timeIntervalSince1970) - 10
            let reply = try await client.post(
                "/v1/push", json: pushBody(devices: ["exp"], extra: #""expiration":\#(past)"#))
            #expect(reply.json?["counts"]?["expired"] == .int(1))
            #expect(firstDelivery(devices(reply)["exp"])?["state"] == .string("expired"))
            #expect(firstDelivery(devices(reply)["exp"])?["attempts"] == .int(0))
            #expect(sandbox.receivedCount == 0)
        }
    }

    @Test("wait false: 202 with a push id at once; GET /v1/push/{id} reports counts, then results when done")
    func asynchronous() async throws {
        try await withDelivery { client, sandbox, _ in
            sandbox.script(FailureScript(status: 200, delayMilliseconds: 300), for: deviceToken(70))
            _ = try await register(client, "a1", deviceToken(70))
            _ = try await register(client, "a2", deviceToken(71))
            let accepted = try await client.post(
                "/v1/push", json: pushBody(devices: ["a1", "a2", "none"], extra: #""wait":false"#))
            #expect(accepted.status == 202)
            #expect(accepted.json?["deliveries"] == .int(2))
            #expect(accepted.json?["not_sent"]?[0]?["device_id"] == .string("none"))
            guard let id = accepted.json?["push_id"]?.stringValue else {
                Issue.record("no push_id: \(accepted.text)")
                return
            }
            let early = try await client.get("/v1/push/\(id)")
            #expect(early.status == 200)
            #expect(early.json?["done"] == .bool(false))
            #expect(early.json?["devices"] == nil)
            var report = early
            let deadline = Date().addingTimeInterval(10)
            while report.json?["done"] != .bool(true), Date() < deadline {
                try await Task.sleep(for: .milliseconds(50))
                report = try await client.get("/v1/push/\(id)")
            }
            #expect(report.json?["counts"]?["delivered"] == .int(2))
            #expect(
                devices(report)["a1"]?["outcome"] == .string("enriched")
                    || devices(report)["a1"]?["outcome"] == .string("no_fix"))
            #expect(devices(report)["none"]?["outcome"] == .string("not_sent"))
            // results=false: the same counts and summary, no per-device results; anything but true/false is a 400.
            let bare = try await client.get("/v1/push/\(id)?results=false")
            #expect(bare.json?["done"] == .bool(true))
            #expect(bare.json?["counts"] == report.json?["counts"])
            #expect(bare.json?["summary"] == report.json?["summary"])
            #expect(report.json?["devices"] != nil)
            #expect(bare.json?["devices"] == nil)
            let bad = try await client.get("/v1/push/\(id)?results=no")
            #expect(bad.status == 400)
            #expect(bad.json?["error"]?["field"] == .string("results"))
            let missing = try await client.get("/v1/push/not-a-push")
            #expect(missing.status == 404)
            #expect(missing.errorReason == "push_not_found")
        }
    }

    @Test("GET /v1/push/{id}?wait= answers when the push is done, or with its progress when the wait ends first")
    func longPoll() async throws {
        try await withDelivery { client, sandbox, _ in
            sandbox.script(FailureScript(status: 200, delayMilliseconds: 400), for: deviceToken(72))
            sandbox.script(FailureScript(status: 200, delayMilliseconds: 3_000), for: deviceToken(73))
            _ = try await register(client, "w1", deviceToken(72))
            _ = try await register(client, "w2", deviceToken(73))
            func submit(_ device: String) async throws -> String {
                let accepted = try await client.post(
                    "/v1/push", json: pushBody(devices: [device], extra: #""wait":false"#))
                #expect(accepted.status == 202)
                return accepted.json?["push_id"]?.stringValue ?? "none"
            }
            // Done before the wait ends: answered then, with the results, not at the end of the wait.
            let quick = try await submit("w1")
            var started = ContinuousClock.now
            let done = try await client.get("/v1/push/\(quick)?wait=20")
            let tookDone = ContinuousClock.now - started
            #expect(done.status == 200)
            #expect(done.json?["done"] == .bool(true))
            #expect(done.json?["counts"]?["delivered"] == .int(1))
            #expect(done.json?["devices"] != nil)
            #expect(tookDone >= .milliseconds(300) && tookDone < .seconds(10), "took \(tookDone)")
            // The wait ends first: the progress, not done.
            let slow = try await submit("w2")
            started = ContinuousClock.now
            let progress = try await client.get("/v1/push/\(slow)?wait=0.3&results=false")
            let tookProgress = ContinuousClock.now - started
            #expect(progress.status == 200)
            #expect(progress.json?["done"] == .bool(false))
            #expect(progress.json?["counts"]?["pending"] == .int(1))
            #expect(tookProgress >= .milliseconds(300) && tookProgress < .milliseconds(2_500), "took \(tookProgress)")
            // A push scheduled after the wait ends: its progress at once, not after the wait.
            let later = Int64(Date().timeIntervalSince1970) + 3_600
            let scheduled = try await client.post(
                "/v1/push", json: pushBody(devices: ["w1"], extra: #""wait":false,"send_at":\#(later)"#))
            #expect(scheduled.status == 202, "\(scheduled.text)")
            let scheduledId = scheduled.json?["push_id"]?.stringValue ?? "none"
            started = ContinuousClock.now
            let notYet = try await client.get("/v1/push/\(scheduledId)?wait=20&results=false")
            #expect(notYet.json?["done"] == .bool(false))
            #expect(ContinuousClock.now - started < .seconds(5))
            // No push by that id: 404 at once, not after the wait.
            started = ContinuousClock.now
            let missing = try await client.get("/v1/push/not-a-push?wait=20")
            #expect(missing.status == 404)
            #expect(ContinuousClock.now - started < .seconds(5))
            for bad in ["soon", "-1", "601", "nan", "inf"] {
                let answer = try await client.get("/v1/push/\(slow)?wait=\(bad)")
                #expect(answer.status == 400, "wait=\(bad)")
                #expect(answer.json?["error"]?["field"] == .string("wait"), "wait=\(bad)")
            }
        }
    }

    @Test("bad push requests say which field and what is allowed; no credentials is a 503 that says what to set")
    func validation() async throws {
        try await withDelivery { client, _, _ in
            let cases: [(String, Int, String)] = [
                (#"{"device_ids":[],"payload":{"aps":{}}}"#, 400, "device_ids"),
                (pushBody(devices: ["a", "a"]), 400, "device_ids"),
                (pushBody(devices: ["a"], extra: #""push_type":"telepathy""#), 400, "push_type"),
                (pushBody(devices: ["a"], extra: #""push_type":"background","priority":10"#), 400, "priority"),
                (
                    pushBody(devices: ["a"], extra: #""collapse_id":"\#(String(repeating: "c", count: 65))""#), 400,
                    "collapse_id"
                ),
                (pushBody(devices: ["a"], extra: #""bogus":1"#), 400, "bogus"),
                (
                    pushBody(
                        devices: ["a"],
                        payload: #"{"aps":{"alert":"x"},"pad":"\#(String(repeating: "x", count: 4100))"}"#), 413,
                    "payload"
                ),
            ]
            for (body, status, field) in cases {
                let reply = try await client.post("/v1/push", json: body)
                #expect(reply.status == status, "\(body.prefix(80))")
                #expect(reply.json?["error"]?["field"] == .string(field), "\(reply.text)")
            }
            let tooMany = pushBody(devices: (0...1000).map { "d\($0)" })
            #expect(try await client.post("/v1/push", json: tooMany).status == 400)
        }
        try await withService { client in
            let reply = try await client.post("/v1/push", json: pushBody(devices: ["a"]))
            #expect(reply.status == 503)
            #expect(reply.errorReason == "delivery_not_configured")
            #expect(reply.json?["error"]?["message"]?.stringValue?.contains("ENRICH_APNS_KEY_FILE") == true)
        }
    }

    @Test("metrics count deliveries by state, status and reason, and report APNs latency")
    func metrics() async throws {
        try await withDelivery { client, sandbox, _ in
            sandbox.script(FailureScript(status: 400, reason: "BadDeviceToken"), for: deviceToken(81))
            _ = try await register(client, "m1", deviceToken(80))
            _ = try await register(client, "m2", deviceToken(81))
            _ = try await client.post("/v1/push", json: pushBody(devices: ["m1", "m2"]))
            let text = try await client.get("/metrics").text
            #expect(text.contains(#"apns_delivery_attempts_total{state="delivered",status="200",reason="none"} 1"#))
            #expect(
                text.contains(#"apns_delivery_attempts_total{state="failed",status="400",reason="BadDeviceToken"} 1"#))
            #expect(text.contains(#"apns_tokens_deactivated_total{reason="BadDeviceToken"} 1"#))
            #expect(text.contains("apns_send_duration_seconds_count 2"))
            #expect(!text.contains(deviceToken(81)))
            // Each device's enrichment is counted with the outcomes /v1/enrich counts, as source "push".
            let pushOutcomes = text.split(separator: "\n").filter {
                $0.hasPrefix("enrichment_outcomes_total{") && $0.contains(#"source="push""#)
            }
            #expect(pushOutcomes.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +) == 2)
        }
    }
}

/// Runs a recording webhook receiver for the test's duration.
func withRecordingWebhook<T: Sendable>(
    _ body: @Sendable (String, RecordingWebhook) async throws -> T
) async throws -> T {
    let webhook = RecordingWebhook()
    return try await webhook.run { base in try await body(base + "/hook", webhook) }
}

/// Runs the real `push-sender` off the cooperative pool (the service under test runs in this process).
func runPushSender(_ arguments: [String]) async throws -> (status: Int32, out: String, err: String) {
    let executable = try #require(builtExecutable(named: "push-sender"), "push-sender must be built next to the tests")
    return try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            process.currentDirectoryURL = repositoryRoot
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            do { try process.run() } catch {
                continuation.resume(throwing: error)
                return
            }
            let outData = out.fileHandleForReading.readDataToEndOfFile()
            let errData = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            continuation.resume(
                returning: (
                    process.terminationStatus, String(decoding: outData, as: UTF8.self),
                    String(decoding: errData, as: UTF8.self)
                ))
        }
    }
}

@Suite("push-sender push through the service")
struct PushCommandTests {
    @Test(
        "prints each device's outcome and each token's result; exit 1 when a delivery failed or a device had no token")
    func push() async throws {
        try await withDelivery { client, sandbox, _ in
            sandbox.script(FailureScript(status: 400, reason: "BadDeviceToken"), for: deviceToken(91))
            try await reportFix(client, "cli-1", lat: 48.8584, lng: 2.2945)
            _ = try await register(client, "cli-1", deviceToken(90))
            _ = try await register(client, "cli-1", deviceToken(91))
            let failed = try await runPushSender([
                "push", "--server", client.base, "--device", "cli-1", "--device", "nobody", "payloads/location.json",
            ])
            #expect(failed.status == 1, "\(failed.err)")
            #expect(failed.out.contains("cli-1: enriched (nearest_poi)"))
            #expect(failed.out.contains("nobody: not_sent (no_active_token)"))
            #expect(failed.out.contains("delivered 200"))
            #expect(failed.out.contains("failed 400 BadDeviceToken"))
            #expect(failed.out.contains("hint: the token may belong to the other environment"))
            #expect(failed.out.contains("1 delivered, 1 failed, 0 expired, 0 pending"))
            #expect(!failed.out.contains(deviceToken(90)), "whole tokens are not printed")

            let good = try await runPushSender([
                "push", "--server", client.base, "--device", "cli-1", "--json", "payloads/location.json",
            ])
            #expect(good.status == 0, "\(good.err)")
            let answer = try JSONValue.decode(Data(good.out.utf8))
            #expect(answer["counts"]?["delivered"] == .int(1))
            #expect(answer["devices"]?[0]?["deliveries"]?[0]?["token"] == .string(deviceToken(90)))

            let queued = try await runPushSender([
                "push", "--server", client.base, "--device", "cli-1", "--no-wait", "payloads/location.json",
            ])
            #expect(queued.status == 0, "\(queued.err)")
            #expect(queued.out.contains("accepted: 1 queued"))
            #expect(queued.out.contains("/v1/push/"))

            // To whoever is near the Eiffel Tower now: cli-1 (its fix is there), not a device elsewhere.
            try await reportFix(client, "cli-far", lat: 45.76, lng: 4.83)
            _ = try await register(client, "cli-far", deviceToken(92))
            let near = try await runPushSender([
                "push", "--server", client.base, "--app", "default", "--json", "--audience",
                #"{"near":{"latitude":48.8584,"longitude":2.2945,"radius_m":300}}"#, "payloads/location.json",
            ])
            #expect(near.status == 0, "\(near.err) \(near.out)")
            let reached = try JSONValue.decode(Data(near.out.utf8))
            #expect(reached["devices"]?[0]?["device_id"] == .string("cli-1"), "\(near.out)")
            #expect(reached["devices"]?[1] == nil)
            let both = try await runPushSender([
                "push", "--server", client.base, "--device", "cli-1", "--audience", "{}", "payloads/location.json",
            ])
            #expect(both.status != 0)
            #expect(both.err.contains("give one of --device, --devices-file and --audience"))

            // Scheduled an hour ahead, capped: queued, listed by the service, with its plan.
            let zoned = try await client.put(
                "/v1/devices/cli-1/apns-tokens/\(deviceToken(90))",
                json: #"{"topic":"com.example.app","environment":"sandbox","time_zone":"UTC"}"#)
            #expect(zoned.json?["time_zone"] == .string("UTC"))
            let sendAt = Int64(Date().timeIntervalSince1970) + 3_600
            let scheduled = try await runPushSender([
                "push", "--server", client.base, "--device", "cli-1", "--json", "--no-wait", "--send-at", "\(sendAt)",
                "--quiet-hours", "22:00-08:00", "--quiet-action", "hold", "--missing-time-zone", "app_default",
                "--cap", "10/86400", "payloads/location.json",
            ])
            #expect(scheduled.status == 0, "err: \(scheduled.err) out: \(scheduled.out)")
            let pushId = try #require(try JSONValue.decode(Data(scheduled.out.utf8))["push_id"]?.stringValue)
            let plan = try await client.get("/v1/push/\(pushId)").json?["plan"]
            #expect(plan?["send_at"]?.lenientDouble == Double(sendAt), "\(String(describing: plan))")
            #expect(plan?["quiet_hours"]?["action"] == .string("hold"))
            #expect(plan?["missing_time_zone"] == .string("app_default"))
            #expect(plan?["cap"]?["max"] == .int(10))
            let badCap = try await runPushSender([
                "push", "--server", client.base, "--device", "cli-1", "--cap", "three", "payloads/location.json",
            ])
            #expect(badCap.status != 0)
            #expect(badCap.err.contains("--cap is MAX/SECONDS"))
            // --callback-url reaches the service, which says callbacks are off here.
            let callback = try await runPushSender([
                "push", "--server", client.base, "--device", "cli-1", "--callback-url", "http://127.0.0.1:9/hook",
                "payloads/location.json",
            ])
            #expect(callback.status != 0)
            #expect(callback.err.contains("ENRICH_PUSH_CALLBACK_HOSTS"), "\(callback.err)")
        }
    }
}
