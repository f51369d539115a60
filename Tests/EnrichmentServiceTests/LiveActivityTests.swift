import APNsCore
import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Waits (up to 10 s) until the mock has received `count` pushes.
func waitForPushes(_ state: MockAPNsState, count: Int) async throws {
    for _ in 0..<200 {
        if state.receivedCount >= count { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("the mock received \(state.receivedCount) pushes, expected \(count)")
}

@Suite("Live Activities through the service, to the mock APNs")
struct LiveActivityTests {
    static let pushToStartToken = deviceToken(0xA1)
    static let updateToken = deviceToken(0xB2)

    func registerTokens(_ client: ServiceClient, device: String, frequent: Bool = true) async throws {
        let start = try await client.put(
            "/v1/devices/\(device)/activity-types/DeliveryAttributes/push-to-start-token",
            json: #"{"token":"\#(Self.pushToStartToken)","topic":"com.example.app","environment":"sandbox"}"#)
        #expect(start.status == 201)
        let update = try await client.put(
            "/v1/devices/\(device)/activities/A-1",
            json:
                #"{"activity_type":"DeliveryAttributes","token":"\#(Self.updateToken)","topic":"com.example.app","environment":"sandbox","frequent_pushes_enabled":\#(frequent)}"#
        )
        #expect(update.status == 201)
    }

    @Test("start by push-to-start token, enriched content-state, Apple's headers, and the budget warning")
    func start() async throws {
        try await withDelivery { client, sandbox, _ in
            // 0.0027° north of the Eiffel Tower (a sample POI): about 300 m.
            try await reportFix(client, "paris", lat: 48.86107, lng: 2.29448)
            try await registerTokens(client, device: "paris")
            let reply = try await client.post(
                "/v1/devices/paris/activity-types/DeliveryAttributes/start",
                json: #"""
                    {"attributes":{"order":"42"},"alert":{"title":"Order 42","body":"On its way"},"enrich":true,
                     "content_state":{"place":"{{name}}","metres":"{{distance_m}}","line":"{{name}} is {{distance}} away","map":"{{map_url}}"},
                     "input_push_token":true}
                    """#)
            #expect(reply.status == 202, "\(reply.text)")
            #expect(reply.json?["event"] == .string("start"))
            #expect(reply.json?["priority"] == .int(10))
            let warnings = reply.json?["warnings"]
            #expect(warnings.map { "\($0)".contains("hourly budget") } == true)
            try await waitForPushes(sandbox, count: 1)
            let push = try #require(sandbox.receivedPushes.first)
            #expect(push.status == 200)
            #expect(push.deviceToken == Self.pushToStartToken)
            #expect(push.pushType == "liveactivity")
            #expect(push.topic == "com.example.app.push-type.liveactivity")
            #expect(push.priority == "10")
            let aps = try #require(try JSONValue.decode(Data(push.payload))["aps"])
            #expect(aps["event"] == .string("start"))
            #expect(aps["attributes-type"] == .string("DeliveryAttributes"))
            #expect(aps["attributes"]?["order"] == .string("42"))
            #expect(aps["input-push-token"] == .int(1))
            if case .int(let timestamp)? = aps["timestamp"] {
                #expect(abs(timestamp - Int64(Date().timeIntervalSince1970)) < 30)
            } else {
                Issue.record("no aps.timestamp")
            }
            // The content-state is the device's nearest place, written here from the fix and the POI: 0.0027° of
            // latitude on a sphere of radius 6,371,008.8 m is 300.2 m ("300 m" in tens of metres).
            let state = try #require(aps["content-state"])
            #expect(state["place"] == .string("Eiffel Tower"))
            let metres = 0.0027 * Double.pi / 180 * 6_371_008.8
            #expect(state["metres"] == .int(Int64(metres.rounded())), "\(state)")
            #expect(state["line"] == .string("Eiffel Tower is 300 m away"), "\(state)")
            #expect(reply.json?["enrichment"]?["outcome"] == .string("enriched"))
        }
    }

    @Test("updates in order, priority 5, end with a dismissal date, nothing after the end")
    func updateAndEnd() async throws {
        try await withDelivery { client, sandbox, _ in
            try await registerTokens(client, device: "d1", frequent: false)
            let now = Int64(Date().timeIntervalSince1970)
            let first = try await client.post(
                "/v1/devices/d1/activities/A-1/update",
                json: #"{"content_state":{"eta":9},"priority":5,"timestamp":\#(now - 10),"stale_date":\#(now + 900)}"#)
            #expect(first.status == 202, "\(first.text)")
            #expect(first.json?["warnings"] == .array([]))
            let older = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{"eta":12},"timestamp":\#(now - 20)}"#)
            #expect(older.status == 409)
            #expect(older.json?["error"]?["reason"] == .string("activity_update_not_newer"))
            let urgent = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{"eta":3}}"#)
            #expect(urgent.status == 202)
            #expect("\(urgent.json?["warnings"] ?? .null)".contains("turned frequent updates off"))
            let end = try await client.post(
                "/v1/devices/d1/activities/A-1/end",
                json: #"{"content_state":{"eta":0},"dismissal_date":\#(now + 5 * 3600),"priority":5}"#)
            #expect(end.status == 202)
            #expect("\(end.json?["warnings"] ?? .null)".contains("4 hours"))
            let late = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{"eta":1}}"#)
            #expect(late.status == 409)
            #expect(late.json?["error"]?["reason"] == .string("activity_ended"))
            try await waitForPushes(sandbox, count: 3)
            let received = sandbox.receivedPushes
            #expect(received.map(\.deviceToken) == Array(repeating: Self.updateToken, count: 3))
            #expect(received.map(\.priority) == ["5", "10", "5"])
            let events = received.compactMap { try? JSONValue.decode(Data($0.payload))["aps"]?["event"]?.stringValue }
            #expect(events == ["update", "update", "end"])
            let listed = try await client.get("/v1/devices/d1/activities")
            #expect(listed.json?["activities"]?[0]?["ended_at"] != nil)
            #expect(listed.json?["push_to_start_tokens"]?[0]?["activity_type"] == .string("DeliveryAttributes"))
            // Deleting the device deletes its Live Activity tokens too.
            let deleted = try await client.delete("/v1/devices/d1")
            #expect(deleted.json?["deleted_activity_tokens"] == .int(2))
            let after = try await client.get("/v1/devices/d1/activities")
            #expect(after.json?["activities"] == .array([]))
            #expect(after.json?["push_to_start_tokens"] == .array([]))
        }
    }

    @Test("a token APNs says is gone (410) is marked, refused until registered again")
    func goneToken() async throws {
        try await withDelivery { client, sandbox, _ in
            try await registerTokens(client, device: "d1")
            sandbox.script(FailureScript(status: 410, reason: "Unregistered", times: 1), for: Self.updateToken)
            let first = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{"eta":5}}"#)
            #expect(first.status == 202)
            let pushID = try #require(first.json?["push_id"]?.stringValue)
            var listed: ServiceClient.Reply?
            for _ in 0..<100 {
                listed = try await client.get("/v1/devices/d1/activities")
                if listed?.json?["activities"]?[0]?["invalidated_at"] != nil { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(listed?.json?["activities"]?[0]?["invalid_reason"] == .string("Unregistered"))
            let report = try await client.get("/v1/push/\(pushID)")
            #expect(report.json?["counts"]?["failed"] == .int(1))
            let refused = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{"eta":4}}"#)
            #expect(refused.status == 409)
            #expect(refused.json?["error"]?["reason"] == .string("activity_token_invalid"))
            // The app registers the activity's new token: it is used at once.
            let again = try await client.put(
                "/v1/devices/d1/activities/A-1",
                json:
                    #"{"activity_type":"DeliveryAttributes","token":"\#(deviceToken(0xC3))","topic":"com.example.app","environment":"sandbox"}"#
            )
            #expect(again.status == 200)
            #expect(again.json?["invalidated_at"] == nil)
            let resumed = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{"eta":3}}"#)
            #expect(resumed.status == 202)
            try await waitForPushes(sandbox, count: 2)
            #expect(sandbox.receivedPushes.last?.deviceToken == deviceToken(0xC3))
        }
    }

    @Test("clear refusals: stale, unknown activity, priority 1, a start without alert, a certificate")
    func refusals() async throws {
        try await withDelivery { client, sandbox, _ in
            try await registerTokens(client, device: "d1")
            let now = Int64(Date().timeIntervalSince1970)
            let stale = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{},"timestamp":\#(now - 301)}"#)
            #expect(stale.status == 422)
            #expect(stale.json?["error"]?["reason"] == .string("stale_activity_update"))
            let unknown = try await client.post(
                "/v1/devices/d1/activities/nope/update", json: #"{"content_state":{}}"#)
            #expect(unknown.status == 404)
            #expect(unknown.json?["error"]?["reason"] == .string("activity_not_found"))
            let noStartToken = try await client.post(
                "/v1/devices/d2/activity-types/DeliveryAttributes/start",
                json: #"{"content_state":{},"attributes":{},"alert":"x"}"#)
            #expect(noStartToken.status == 404)
            #expect(noStartToken.json?["error"]?["message"]?.stringValue?.contains("pushToStartTokenUpdates") == true)
            let priority = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{},"priority":1}"#)
            #expect(priority.status == 400)
            #expect(priority.json?["error"]?["field"] == .string("priority"))
            let noAlert = try await client.post(
                "/v1/devices/d1/activity-types/DeliveryAttributes/start",
                json: #"{"content_state":{},"attributes":{}}"#)
            #expect(noAlert.status == 400)
            #expect(noAlert.json?["error"]?["field"] == .string("alert"))
            let dismissalOnUpdate = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{},"dismissal_date":1}"#)
            #expect(dismissalOnUpdate.status == 400)
            #expect(dismissalOnUpdate.json?["error"]?["reason"] == .string("unknown_field"))
            let badTemplate = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{"x":"{{nmae}}"},"enrich":true}"#)
            #expect(badTemplate.status == 400)
            #expect(badTemplate.json?["error"]?["field"] == .string("content_state.x"))
            let suffixed = try await client.put(
                "/v1/devices/d1/activities/A-2",
                json:
                    #"{"activity_type":"T","token":"\#(Self.updateToken)","topic":"com.example.app.push-type.liveactivity","environment":"sandbox"}"#
            )
            #expect(suffixed.status == 400)
            #expect(sandbox.receivedCount == 0)
        }
    }

    @Test("a service with only a certificate refuses Live Activity pushes, naming the settings to use")
    func certificateOnly() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("la-cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certFile = directory.appendingPathComponent("cert.pem").path
        let keyFile = directory.appendingPathComponent("key.pem").path
        try authority.clientCertificatePEM.write(toFile: certFile, atomically: true, encoding: .utf8)
        try authority.clientKeyPEM.write(toFile: keyFile, atomically: true, encoding: .utf8)
        try await withDelivery({ configuration in
            configuration.delivery.keyFile = nil
            configuration.delivery.keyID = nil
            configuration.delivery.teamID = nil
            configuration.delivery.certificateFile = certFile
            configuration.delivery.certificateKeyFile = keyFile
        }) { client, _, _ in
            try await registerTokens(client, device: "d1")
            let reply = try await client.post(
                "/v1/devices/d1/activities/A-1/update", json: #"{"content_state":{}}"#)
            #expect(reply.status == 409)
            #expect(reply.json?["error"]?["reason"] == .string("live_activity_needs_token_auth"))
            #expect(reply.json?["error"]?["message"]?.stringValue?.contains("ENRICH_APNS_KEY_FILE") == true)
        }
    }

    @Test(
        "a timestamp further ahead than the window is a 400 naming it; a new push-to-start token clears the type's order",
        arguments: Backend.allCases)
    func futureTimestamps(backend: Backend) async throws {
        let url = backend == .postgres ? try await PostgresTestDatabase.makeURL() : nil
        let now = Int64(Date().timeIntervalSince1970)
        let clock = FixedWallClock(epochSeconds: Double(now))
        try await withDelivery(clock: clock, { $0.databaseURL = url.map { Secret($0) } }) { client, sandbox, _ in
            func putStartToken(_ token: String) async throws {
                let reply = try await client.put(
                    "/v1/devices/d1/activity-types/DeliveryAttributes/push-to-start-token",
                    json: #"{"token":"\#(token)","topic":"com.example.app","environment":"sandbox"}"#)
                #expect(reply.status == 200 || reply.status == 201, "\(reply.text)")
            }
            func start(at timestamp: Int64) async throws -> ServiceClient.Reply {
                try await client.post(
                    "/v1/devices/d1/activity-types/DeliveryAttributes/start",
                    json: #"{"attributes":{},"content_state":{},"alert":"Order 42","timestamp":\#(timestamp)}"#)
            }
            try await putStartToken(Self.pushToStartToken)
            let threeYears = try await start(at: now + 3 * 365 * 86_400)
            #expect(threeYears.status == 400, "\(threeYears.text)")
            #expect(threeYears.json?["error"]?["field"] == .string("timestamp"))
            let justOver = try await start(at: now + 301)
            #expect(justOver.status == 400, "\(justOver.text)")
            #expect(justOver.json?["error"]?["field"] == .string("timestamp"))
            let atBound = try await start(at: now + 300)
            #expect(atBound.status == 202, "300 s ahead is allowed: \(atBound.text)")
            let older = try await start(at: now + 100)
            #expect(older.status == 409)
            #expect(older.json?["error"]?["reason"] == .string("activity_update_not_newer"))
            // The same token registered again keeps the order; a new token starts it afresh.
            try await putStartToken(Self.pushToStartToken)
            #expect(try await start(at: now + 100).status == 409)
            try await putStartToken(deviceToken(0xA7))
            let afresh = try await start(at: now + 100)
            #expect(afresh.status == 202, "\(afresh.text)")
            try await waitForPushes(sandbox, count: 2)
            #expect(sandbox.receivedPushes.map(\.deviceToken) == [Self.pushToStartToken, deviceToken(0xA7)])
        }
    }
}
