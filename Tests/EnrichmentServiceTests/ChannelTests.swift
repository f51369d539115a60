import APNsCore
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

@Suite("Broadcast channels kept by the service, sent through the mock")
struct ChannelTests {
    func withChannels<T: Sendable>(
        _ adjust: @escaping @Sendable (inout ServiceConfiguration) -> Void = { _ in },
        _ body: @Sendable (ServiceClient, MockAPNsState) async throws -> T
    ) async throws -> T {
        // Only the push hosts are set (to the mocks): channel requests and broadcasts follow them (issue 47).
        try await withDelivery({ configuration in adjust(&configuration) }) { client, sandbox, _ in
            try await body(client, sandbox)
        }
    }

    @Test("create, list, read, broadcast, delete; the channel lives at the mock and in the service")
    func lifecycle() async throws {
        try await withChannels { client, mock in
            let created = try await client.post(
                "/v1/channels",
                json: #"{"bundle_id":"com.example.app","environment":"sandbox","storage_policy":"none"}"#)
            #expect(created.status == 201, "\(created.text)")
            let id = try #require(created.json?["channel_id"]?.stringValue)
            #expect(mock.broadcastChannels.map(\.id) == [id])
            #expect(mock.broadcastChannels.first?.messageStoragePolicy == 0)
            let listed = try await client.get("/v1/channels?bundle_id=com.example.app&environment=sandbox")
            #expect(listed.json?["channels"]?[0]?["channel_id"]?.stringValue == id)
            #expect(try await client.get("/v1/channels?environment=production").json?["channels"] == .array([]))
            let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
            #expect(try await client.get("/v1/channels/\(encoded)").json?["storage_policy"] == .string("none"))

            let sent = try await client.post(
                "/v1/channels/\(encoded)/broadcast", json: #"{"content_state":{"score":"2-1"},"priority":1}"#)
            #expect(sent.status == 200, "\(sent.text)")
            #expect(sent.json?["apns_unique_id"]?.stringValue?.isEmpty == false)
            let broadcast = try #require(mock.receivedBroadcasts.last)
            #expect(broadcast.status == 200)
            #expect(broadcast.priority == "1")
            #expect(broadcast.expiration == "0")
            let aps = try JSONValue.decode(Data(broadcast.payload))["aps"]
            #expect(aps?["event"] == .string("update"))
            #expect(aps?["content-state"]?["score"] == .string("2-1"))

            // Refused here, with what to do: a stored-nothing channel takes expiration 0 only; no start.
            let expiring = try await client.post(
                "/v1/channels/\(encoded)/broadcast", json: #"{"content_state":{},"expiration":1900000000}"#)
            #expect(expiring.status == 400)
            #expect(expiring.json?["error"]?["field"] == .string("expiration"))
            let start = try await client.post(
                "/v1/channels/\(encoded)/broadcast", json: #"{"content_state":{},"event":"start"}"#)
            #expect(start.status == 400)
            #expect(mock.receivedBroadcasts.count == 1)

            let deleted = try await client.delete("/v1/channels/\(encoded)")
            #expect(deleted.status == 200)
            #expect(mock.broadcastChannels.isEmpty)
            #expect(try await client.get("/v1/channels/\(encoded)").status == 404)
        }
    }

    @Test("APNs's refusals are answered with its reason and a hint")
    func refusals() async throws {
        try await withChannels { client, _ in
            let suffixed = try await client.post(
                "/v1/channels",
                json:
                    #"{"bundle_id":"com.example.app.push-type.liveactivity","environment":"sandbox","storage_policy":"none"}"#
            )
            #expect(suffixed.status == 400)
            #expect(suffixed.json?["error"]?["field"] == .string("bundle_id"))
            let badPolicy = try await client.post(
                "/v1/channels", json: #"{"bundle_id":"com.example.app","environment":"sandbox","storage_policy":"all"}"#
            )
            #expect(badPolicy.status == 400)
        }
        try await withChannels({ $0.delivery.broadcastSandboxURL = "https://127.0.0.1:1" }) { client, mock in
            // Channel made at the mock; broadcasts go to a closed port: unavailable, with Retry-After.
            let created = try await client.post(
                "/v1/channels",
                json: #"{"bundle_id":"com.example.app","environment":"sandbox","storage_policy":"most-recent"}"#)
            let id = try #require(created.json?["channel_id"]?.stringValue)
            let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
            let sent = try await client.post("/v1/channels/\(encoded)/broadcast", json: #"{"content_state":{}}"#)
            #expect(sent.status == 503)
            #expect(sent.json?["error"]?["reason"] == .string("apns_unavailable"))
            #expect(sent.headers["retry-after"] == "5")
            #expect(mock.broadcastChannels.count == 1)
        }
        try await withChannels { client, mock in
            // The channel is gone at APNs (deleted elsewhere): APNs's reason comes back, and DELETE forgets it.
            let created = try await client.post(
                "/v1/channels",
                json: #"{"bundle_id":"com.example.app","environment":"sandbox","storage_policy":"none"}"#)
            let id = try #require(created.json?["channel_id"]?.stringValue)
            let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
            #expect(mock.deleteChannelForTesting(id, bundleID: "com.example.app"))
            let sent = try await client.post("/v1/channels/\(encoded)/broadcast", json: #"{"content_state":{}}"#)
            #expect(sent.status == 422)
            #expect(sent.json?["error"]?["reason"] == .string("apns_refused"))
            #expect(sent.json?["error"]?["apns_reason"] == .string("ChannelNotRegistered"))
            #expect(sent.json?["error"]?["message"]?.stringValue?.contains("list the app's channels") == true)
            let enrich = try await client.post(
                "/v1/channels/\(encoded)/broadcast", json: #"{"content_state":{"x":"{{name}}"},"enrich":true}"#)
            #expect(enrich.status == 400)
            #expect(enrich.json?["error"]?["field"] == .string("enrich"))
            #expect(try await client.delete("/v1/channels/\(encoded)").status == 200)
            #expect(try await client.get("/v1/channels").json?["channels"] == .array([]))
        }
    }

    @Test("the app's channel limit at APNs is a 409 with Apple's reason and the hint")
    func limit() async throws {
        // The mock's limit is Apple's 10,000; fill it directly, then ask the service for one more.
        try await withChannels { client, mock in
            for _ in 0..<10_000 { _ = mock.createChannelForTesting(bundleID: "com.example.app") }
            let refused = try await client.post(
                "/v1/channels",
                json: #"{"bundle_id":"com.example.app","environment":"sandbox","storage_policy":"none"}"#)
            #expect(refused.status == 409)
            #expect(refused.json?["error"]?["apns_reason"] == .string("CannotCreateChannelConfig"))
            #expect(refused.json?["error"]?["message"]?.stringValue?.contains("delete channels") == true)
        }
    }
}
