import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import TestSupport
import Testing

@Suite("/v1/enrich: per-request rules, unknown members, hints, a fix for one evaluation")
struct EnrichRulesTests {
    static let t: Int64 = 1_700_000_000

    @Test("window and max_future_skew per request are used and echoed; bad values name the field")
    func perRequestRules() async throws {
        try await withService { client in
            let payload = locationPayload(timestamp: "\(Self.t)")
            func enrich(_ extra: String) async throws -> ServiceClient.Reply {
                try await client.post(
                    "/v1/enrich", json: #"{"device_id":"d","payload":\#(payload),"at":\#(Self.t + 61)\#(extra)}"#)
            }
            let service = try await enrich("")
            #expect(service.json?["staleness"]?["state"] == .string("fresh"))
            #expect(service.json?["rules"]?["window"] == .int(300))
            #expect(service.json?["rules"]?["max_future_skew"] == .null)
            let sixty = try await enrich(#","window":60"#)
            #expect(sixty.json?["staleness"]?["state"] == .string("stale"))
            #expect(sixty.json?["rules"]?["window"] == .int(60))
            let sixtyOne = try await enrich(#","window":61"#)
            #expect(sixtyOne.json?["staleness"]?["state"] == .string("fresh"))
            let future = try await client.post(
                "/v1/enrich",
                json:
                    #"{"device_id":"d","payload":\#(locationPayload(timestamp: "\(Self.t + 100)")),"at":\#(Self.t),"max_future_skew":99}"#
            )
            #expect(future.json?["staleness"]?["rule"] == .string("future_skew"))
            #expect(future.json?["rules"]?["max_future_skew"] == .int(99))
            for (extra, field) in [
                (#","window":-1"#, "window"), (#","window":"60""#, "window"),
                (#","max_future_skew":1.5"#, "max_future_skew"),
                (#","windw":60"#, "windw"),
            ] {
                let refused = try await enrich(extra)
                #expect(refused.status == 400, "\(extra)")
                #expect(refused.json?["error"]?["field"] == .string(field), "\(refused.text)")
            }
            #expect(try await enrich(#","windw":60"#).errorReason == "unknown_field")
        }
    }

    @Test("hints: a millisecond timestamp, and a fix taken after the evaluation time")
    func hints() async throws {
        try await withService { client in
            let now = Int64(Date().timeIntervalSince1970)
            _ = try await client.post(
                "/v1/devices/h/locations",
                json: #"{"locations":[{"latitude":48.85,"longitude":2.35,"utc_timestamp":\#(now - 5)}]}"#)
            let ms = try await client.post(
                "/v1/enrich", json: enrichBody(device: "h", payload: locationPayload(timestamp: "\(now * 1000)")))
            guard case .array(let hints)? = ms.json?["hints"] else {
                Issue.record("no hints: \(ms.text)")
                return
            }
            #expect(hints.contains { $0.stringValue?.contains("looks like milliseconds") == true })
            // Judged 100 s in the past, the newest fix is from after that moment.
            let past = try await client.post(
                "/v1/enrich",
                json: enrichBody(device: "h", payload: locationPayload(timestamp: "\(now - 100)"), at: now - 100))
            guard case .array(let pastHints)? = past.json?["hints"] else {
                Issue.record("no hints: \(past.text)")
                return
            }
            #expect(pastHints.contains { $0.stringValue?.contains("after the evaluation time") == true })
            let plain = try await client.post(
                "/v1/enrich", json: enrichBody(device: "h", payload: locationPayload(timestamp: "\(now)")))
            #expect(plain.json?["hints"] == nil)
        }
    }

    @Test("a sample payload posted with its {{now}} placeholder says so, in woosmap mode too")
    func placeholderTimestamp() async throws {
        try await withService { client in
            // payloads/location.json as it is in the repository.
            let file = repositoryRoot.appendingPathComponent("payloads/location.json")
            let sample = try String(contentsOf: file, encoding: .utf8)
            #expect(sample.contains("{{now}}"))
            for mode in ["default", "woosmap"] {
                let reply = try await client.post(
                    "/v1/enrich", json: #"{"device_id":"d","mode":"\#(mode)","payload":\#(sample)}"#)
                #expect(reply.status == 200, "\(reply.text)")
                #expect(reply.json?["outcome"] == .string("no_timestamp"))
                let detail = reply.json?["staleness"]?["detail"]?.stringValue ?? ""
                #expect(detail.contains("unfilled placeholder \"{{now}}\""), "\(reply.text)")
                guard case .array(let hints)? = reply.json?["hints"] else {
                    Issue.record("no hints: \(reply.text)")
                    continue
                }
                #expect(hints.contains { $0.stringValue?.contains("$(date +%s)") == true }, "\(reply.text)")
            }
        }
    }

    @Test("a fix in the request is used for that evaluation only")
    func requestFix() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            _ = try await client.post("/v1/pois", json: onePOI("l", "Lyon", lat: 45.75, lng: 4.85))
            let now = Int64(Date().timeIntervalSince1970)
            let reply = try await client.post(
                "/v1/enrich",
                json:
                    #"{"device_id":"nofix","payload":\#(locationPayload(timestamp: "\(now)")),"fix":{"latitude":45.76,"longitude":4.85}}"#
            )
            #expect(reply.json?["outcome"] == .string("enriched"))
            #expect(reply.json?["fix"]?["context"] == .string("request"))
            // The city is not repeated when the place is the city.
            #expect(reply.json?["notification"]?["body"] == .string("Lyon is 1.1 km away"))
            #expect(try await client.get("/v1/devices/nofix/location").status == 404)
            let bad = try await client.post(
                "/v1/enrich",
                json:
                    #"{"device_id":"nofix","payload":\#(locationPayload(timestamp: "\(now)")),"fix":{"latitude":95,"longitude":4}}"#
            )
            #expect(bad.json?["error"]?["field"] == .string("fix.latitude"))
        }
    }
}

@Suite("POIs by store id over HTTP")
struct POIByIdTests {
    @Test("GET and DELETE /v1/pois/{store_id}; a deleted POI leaves the search at once")
    func getDelete() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            _ = try await client.post("/v1/pois", json: onePOI("shop 1", "Shop", lat: 45, lng: 5))
            let got = try await client.get("/v1/pois/shop%201")
            #expect(got.status == 200)
            #expect(got.json?["properties"]?["store_id"] == .string("shop 1"))
            #expect(got.json?["geometry"]?["coordinates"] == .array([.int(5), .int(45)]))
            let search = try await client.get("/stores/search/?lat=45&lng=5")
            #expect(search.json?["features"].map { if case .array(let f) = $0 { f.count } else { -1 } } == 1)
            #expect(try await client.delete("/v1/pois/shop%201").status == 200)
            #expect(try await client.get("/v1/pois/shop%201").errorReason == "unknown_poi")
            #expect(try await client.delete("/v1/pois/shop%201").errorReason == "unknown_poi")
            let after = try await client.get("/stores/search/?lat=45&lng=5")
            #expect(after.json?["features"] == .array([]))
        }
    }
}
