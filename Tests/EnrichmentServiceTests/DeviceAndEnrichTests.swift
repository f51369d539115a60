import EnrichmentCore
import EnrichmentRuntime
import EnrichmentService
import Essentials
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@Suite("Service: devices and enrichment over HTTP")
struct DeviceAndEnrichTests {
    static let now: Int64 = 1_800_000_000

    @Test("out-of-order batches: the last fix is the newest by fix time")
    func fixOrdering() async throws {
        try await withService(clock: FixedWallClock(epochSeconds: Double(Self.now))) { client in
            let first = try await client.post(
                "/v1/devices/dev-1/locations",
                json: """
                    {"locations":[{"latitude":43.6,"longitude":3.88,"utc_timestamp":\(Self.now - 10)},
                                  {"latitude":"10","longitude":"10","utc_timestamp":\(Self.now - 100)}]}
                    """)
            #expect(first.status == 200)
            #expect(first.json?["accepted"] == .int(2))
            // Arrives later but was taken earlier: must not win.
            _ = try await client.post(
                "/v1/devices/dev-1/locations",
                json: #"{"locations":[{"latitude":1,"longitude":1,"utc_timestamp":\#(Self.now - 50)}]}"#)
            let location = try await client.get("/v1/devices/dev-1/location")
            #expect(location.status == 200)
            #expect(location.json?["latitude"] == .double(43.6))
            #expect(location.json?["utc_timestamp"] == .int(Self.now - 10))
            #expect(location.json?["age_seconds"] == .int(10))
        }
    }

    @Test("per-item rejections come back with index and reason; an all-bad batch is 422")
    func rejections() async throws {
        try await withService { client in
            let mixed = try await client.post(
                "/v1/devices/d/locations",
                json:
                    #"{"locations":[{"latitude":0,"longitude":0,"utc_timestamp":1700000000},{"latitude":100,"longitude":0,"utc_timestamp":1700000000}]}"#
            )
            #expect(mixed.status == 200)
            #expect(mixed.json?["accepted"] == .int(1))
            #expect(
                mixed.json?["rejected"]
                    == .array([.object(["index": .int(1), "reason": .string("latitude 100.0 is outside [-90, 90]")])]))
            let bad = try await client.post("/v1/devices/d/locations", json: #"{"locations":[{"latitude":0}]}"#)
            #expect(bad.status == 422)
            #expect(bad.json?["accepted"] == .int(0))
            let notBatch = try await client.post("/v1/devices/d/locations", json: #"{"fixes":[]}"#)
            #expect(notBatch.status == 400)
            #expect(notBatch.errorReason == "invalid_batch")
        }
    }

    @Test("unknown device: 404 with the JSON error shape; delete removes the fixes")
    func notFoundAndDelete() async throws {
        try await withService { client in
            let missing = try await client.get("/v1/devices/ghost/location")
            #expect(missing.status == 404)
            #expect(missing.errorReason == "no_fix")
            #expect(missing.json?["error"]?["message"]?.stringValue?.contains("ghost") == true)
            _ = try await client.post(
                "/v1/devices/d2/locations",
                json: #"{"locations":[{"latitude":0,"longitude":0,"utc_timestamp":1700000000}]}"#)
            let deleted = try await client.request(.DELETE, "/v1/devices/d2")
            #expect(deleted.json?["deleted_fixes"] == .int(1))
            #expect(try await client.get("/v1/devices/d2/location").status == 404)
        }
    }

    @Test("enrich with the local sample POIs, evaluated at a given time")
    func enrichLocal() async throws {
        try await withService({ $0.mapKey = "MAPKEY" }, clock: FixedWallClock(epochSeconds: Double(Self.now))) {
            client in
            _ = try await client.post(
                "/v1/devices/phone/locations",
                json: #"{"locations":[{"latitude":43.6047,"longitude":3.8805,"utc_timestamp":\#(Self.now - 30)}]}"#)
            let reply = try await client.post(
                "/v1/enrich",
                json: enrichBody(
                    device: "phone", payload: locationPayload(timestamp: "\(Self.now)"), at: Self.now + 300))
            #expect(reply.status == 200)
            let json = try #require(reply.json)
            #expect(json["outcome"] == .string("enriched"))
            #expect(json["staleness"]?["rule"] == .string("within_window"))
            #expect(
                json["pois"].flatMap { if case .array(let a) = $0 { a.first?["store_id"] } else { nil } }
                    == .string("montpellier-gare"))
            #expect(json["notification"]?["title"] == .string("Hello"))
            #expect(json["notification"]?["body"]?.stringValue?.hasPrefix("Gare Saint-Roch is ") == true)
            #expect(json["static_map_url"]?.stringValue?.hasSuffix("&key=MAPKEY") == true)
            #expect(json["payload"]?["aps"]?["alert"]?["body"] == json["notification"]?["body"])
            #expect(json["fix"]?["age_seconds"] == .int(330))

            let stale = try await client.post(
                "/v1/enrich",
                json: enrichBody(
                    device: "phone", payload: locationPayload(timestamp: "\(Self.now)"), at: Self.now + 301,
                    mode: "woosmap"))
            #expect(stale.json?["outcome"] == .string("stale"))
            #expect(stale.json?["notification"]?["body"] == .string("OUT OF TIME"))
        }
    }

    @Test("the configured places query filters what enrichment finds")
    func enrichWithPlacesQuery() async throws {
        var configuration = ServiceConfiguration()
        try configuration.set("ENRICH_PLACES_QUERY", #"tag:"tourism" AND NOT city:"Montpellier""#)
        let filter = configuration.placesQuery
        try await withService(
            {
                $0.placesQuery = filter
                $0.placesLimit = 1
            }, clock: FixedWallClock(epochSeconds: Double(Self.now))
        ) { client in
            _ = try await client.post(
                "/v1/devices/phone/locations",
                json: #"{"locations":[{"latitude":43.6047,"longitude":3.8805,"utc_timestamp":\#(Self.now - 30)}]}"#)
            let reply = try await client.post(
                "/v1/enrich", json: enrichBody(device: "phone", payload: locationPayload(timestamp: "\(Self.now)")))
            // The nearest tourism place outside Montpellier, seen from Montpellier, is in Paris (Notre-Dame).
            #expect(
                reply.json?["pois"].flatMap { if case .array(let a) = $0 { a.first?["store_id"] } else { nil } }
                    == .string("paris-notre-dame"))
        }
        #expect(throws: ConfigurationError.self) { try configuration.set("ENRICH_PLACES_QUERY", "type:cafe") }
    }

    @Test("request validation names the field")
    func validation() async throws {
        try await withService { client in
            let cases: [(String, String)] = [
                (#"{"payload":{}}"#, "device_id is required"),
                (#"{"device_id":5,"payload":{}}"#, "device_id must be a string, found integer"),
                (#"{"device_id":"d"}"#, "payload is required (the APNs payload, a JSON object)"),
                (#"{"device_id":"d","payload":[]}"#, "payload must be a JSON object, found array"),
                (#"{"device_id":"d","payload":{},"at":"now"}"#, "at must be epoch seconds (a number), found string"),
                (
                    #"{"device_id":"d","payload":{},"mode":"fancy"}"#,
                    "mode 'fancy' is unknown; use one of woosmap, default"
                ),
            ]
            for (body, message) in cases {
                let reply = try await client.post("/v1/enrich", json: body)
                #expect(reply.status == 400, "\(body)")
                #expect(reply.json?["error"]?["message"] == .string(message))
            }
            let broken = try await client.post("/v1/enrich", json: "{nope")
            #expect(broken.errorReason == "invalid_json")
        }
    }

    @Test("an input payload over 4096 bytes is 413 payload_too_large")
    func oversize() async throws {
        try await withService { client in
            let big = #"{"aps":{"alert":"x","mutable-content":1},"pad":"\#(String(repeating: "p", count: 4100))"}"#
            let reply = try await client.post("/v1/enrich", json: enrichBody(device: "d", payload: big))
            #expect(reply.status == 413)
            #expect(reply.errorReason == "payload_too_large")
        }
    }

    @Test("request bodies over the limit are refused with 413 and the JSON error shape")
    func bodyLimit() async throws {
        try await withService({ $0.maxBodyBytes = 2048 }) { client in
            let reply = try await client.post(
                "/v1/enrich", json: "{\"pad\":\"" + String(repeating: "a", count: 5000) + "\"}")
            #expect(reply.status == 413)
            #expect(reply.errorReason == "body_too_large")
        }
    }
}
