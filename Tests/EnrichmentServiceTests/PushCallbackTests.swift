import Crypto
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import Synchronization
import TestSupport
import Testing

/// A push's `callback_url`: its report is posted there once every delivery is final, signed when a secret is set,
/// recorded durably, retried after a refusal, and only to hosts the operator allows.
@Suite("Push callbacks", .serialized)
struct PushCallbackTests {
    static let secret = "callback-secret-for-tests"

    static func waitForBodies(_ webhook: RecordingWebhook, count: Int) async throws {
        let deadline = Date().addingTimeInterval(15)
        while webhook.bodies.withLock({ $0.count < count }), Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test(
        "the report is posted once when every delivery is final, signed, and GET says it was sent",
        arguments: Backend.allCases)
    func postedWhenFinal(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        try await withRecordingWebhook { hook, webhook in
            try await withDelivery({
                $0.databaseURL = url.map { Secret($0) }
                $0.delivery.callbackHosts = ["127.0.0.1"]
                $0.delivery.callbackSecret = Secret(Self.secret)
            }) { client, sandbox, _ in
                sandbox.script(FailureScript(status: 400, reason: "BadDeviceToken"), for: deviceToken(71))
                _ = try await register(client, "cb-a", deviceToken(70))
                _ = try await register(client, "cb-b", deviceToken(71))
                let reply = try await client.post(
                    "/v1/push",
                    json: pushBody(
                        devices: ["cb-a", "cb-b", "cb-none"], extra: #""callback_url":"\#(hook)","wait":true"#))
                #expect(reply.status == 200, "\(reply.text)")
                let pushId = try #require(reply.json?["push_id"]?.stringValue)
                try await Self.waitForBodies(webhook, count: 1)
                // Nothing more comes: one post per push.
                try await Task.sleep(for: .milliseconds(300))
                let bodies = webhook.bodies.withLock { $0 }
                #expect(bodies.count == 1)
                let body = try #require(bodies.first)
                #expect(body["event"] == .string("push_final"))
                #expect(body["push_id"] == .string(pushId))
                #expect(body["counts"]?["delivered"] == .int(1))
                #expect(body["counts"]?["failed"] == .int(1))
                #expect(body["counts"]?["pending"] == .int(0))
                #expect(body["summary"]?["matched"] == .int(3))
                #expect(body["summary"]?["accepted"] == .int(1))
                #expect(body["summary"]?["failed"] == .int(1))
                // The signature is the HMAC-SHA256 of the bytes received, computed here with the shared secret.
                let received = try #require(webhook.raw.withLock { $0.first })
                let mac = HMAC<SHA256>.authenticationCode(
                    for: received.body, using: SymmetricKey(data: Data(Self.secret.utf8)))
                #expect(received.signature == "sha256=" + mac.map { String(format: "%02x", $0) }.joined())
                #expect(received.pushId == pushId)
                // The push's report says where its callback stands.
                let status = try await client.get("/v1/push/\(pushId)")
                #expect(status.json?["callback"]?["state"] == .string("sent"), "\(status.text)")
                #expect(status.json?["callback"]?["attempts"] == .int(1))
                #expect(status.json?["callback"]?["url"] == .string(hook))
            }
        }
    }

    @Test("a refused callback is recorded and due again later; a push with nothing to send is final at once")
    func retriedAfterRefusal() async throws {
        let webhook = RecordingWebhook()
        try await webhook.run { base in
            try await withDelivery({ $0.delivery.callbackHosts = ["127.0.0.1"] }) { client, _, _ in
                // No device has a token: nothing to send, the push is final as it is accepted.
                let reply = try await client.post(
                    "/v1/push",
                    json: pushBody(devices: ["nobody"], extra: #""callback_url":"\#(base)/fail-once""#))
                let pushId = try #require(reply.json?["push_id"]?.stringValue, "\(reply.text)")
                let deadline = Date().addingTimeInterval(15)
                var callback: JSONValue?
                while Date() < deadline {
                    callback = try await client.get("/v1/push/\(pushId)").json?["callback"]
                    if callback?["attempts"] == .int(1) { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(webhook.refused.withLock { $0 } == 1)
                #expect(webhook.bodies.withLock { $0.isEmpty })
                #expect(callback?["state"] == .string("retrying"))
                #expect(callback?["last_outcome"] == .string("HTTP 500"))
                let last = try #require(callback?["last_attempt_at"]?.lenientDouble)
                let next = try #require(callback?["next_attempt_at"]?.lenientDouble)
                #expect(abs(next - last - 30) < 2, "the first retry is 30 s after the refusal")
            }
        }
    }

    @Test("a scheduled push's callback waits for its last send time")
    func scheduledWaits() async throws {
        try await withDelivery({ $0.delivery.callbackHosts = ["127.0.0.1"] }) { client, _, _ in
            _ = try await register(client, "later", deviceToken(75))
            let sendAt = Date().timeIntervalSince1970 + 3_600
            let reply = try await client.post(
                "/v1/push",
                json: pushBody(
                    devices: ["later"], payload: #"{"aps":{"alert":"later"}}"#,
                    extra: #""enrich":false,"send_at":\#(sendAt),"callback_url":"http://127.0.0.1:9/hook""#))
            let pushId = try #require(reply.json?["push_id"]?.stringValue, "\(reply.text)")
            let callback = try await client.get("/v1/push/\(pushId)").json?["callback"]
            #expect(callback?["state"] == .string("waiting"))
            #expect(callback?["attempts"] == .int(0))
            #expect(callback?["next_attempt_at"]?.lenientDouble == sendAt, "\(String(describing: callback))")
        }
    }

    @Test("callback_url is refused when callbacks are off, for a host not allowed, and when it is not http(s)")
    func refused() async throws {
        try await withDelivery { client, _, _ in
            let off = try await client.post(
                "/v1/push", json: pushBody(devices: ["x"], extra: #""callback_url":"http://127.0.0.1:9/hook""#))
            #expect(off.status == 400)
            #expect(off.json?["error"]?["field"] == .string("callback_url"))
            #expect(off.text.contains("ENRICH_PUSH_CALLBACK_HOSTS"))
        }
        try await withDelivery({ $0.delivery.callbackHosts = ["hooks.example.com"] }) { client, _, _ in
            for url in ["http://127.0.0.1:9/hook", "ftp://hooks.example.com/x", "https://u:p@hooks.example.com/x"] {
                let reply = try await client.post(
                    "/v1/push", json: pushBody(devices: ["x"], extra: #""callback_url":"\#(url)""#))
                #expect(reply.status == 400, "\(url): \(reply.text)")
                #expect(reply.json?["error"]?["field"] == .string("callback_url"))
            }
        }
    }
}
