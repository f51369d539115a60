import EnrichmentRuntime
import Essentials
import Foundation
import TestSupport
import Testing

/// Issue 47, items 1 and 11: what a request may say and how the service answers what it may not.
@Suite("Input edges: query numbers, long inputs, duplicate keys, URLs the service calls, visits far ahead")
struct InputEdgeTests {
    @Test("?wait= takes decimal seconds only: 0x10, +1, 1e3, inf, 601 are a 400 naming wait; 2.5 is read")
    func waitParameter() async throws {
        try await withDelivery { client, _, _ in
            for raw in ["0x10", "%2B1", "1e3", "inf", "nan", "601", "-1", "1.2345", ""] {
                let reply = try await client.get("/v1/push/00000000-0000-4000-8000-000000000000?wait=\(raw)")
                #expect(reply.status == 400, "wait=\(raw): \(reply.text)")
                #expect(reply.json?["error"]?["field"] == .string("wait"), "wait=\(raw)")
            }
            for raw in ["2.5", "0", "600", "0.25"] {
                // Read, then the push is looked for: there is none.
                let reply = try await client.get("/v1/push/00000000-0000-4000-8000-000000000000?wait=\(raw)")
                #expect(reply.status == 404, "wait=\(raw): \(reply.text)")
            }
        }
    }

    @Test("an error about a 1 MB value says which value without quoting it back whole")
    func longInputsCut() async throws {
        let huge = String(repeating: "x", count: 1_000_000)
        try await withDelivery({ $0.maxBodyBytes = 4 << 20 }) { client, _, _ in
            for body in [
                #"{"device_ids":["\#(huge)"],"payload":{"aps":{"alert":"x"}}}"#,
                #"{"device_ids":["a"],"payload":{"aps":{"alert":"x"}},"\#(huge)":1}"#,
                #"{"device_ids":["a"],"payload":{"aps":{"alert":"x"}},"collapse_id":"\#(huge)"}"#,
            ] {
                let reply = try await client.post("/v1/push", json: body)
                #expect(reply.status == 400, "\(reply.text.prefix(300))")
                #expect(reply.text.utf8.count < 4_096, "an error of \(reply.text.utf8.count) bytes")
                #expect(reply.json?["error"]?["message"]?.stringValue?.isEmpty == false)
            }
        }
    }

    @Test("JSON with a key twice in one object is 400 invalid_json, at any depth; each key once is fine")
    func duplicateKeys() async throws {
        try await withService { client in
            for body in [
                #"{"locations":[{"latitude":1,"longitude":2,"utc_timestamp":1}],"locations":[]}"#,
                #"{"locations":[{"latitude":1,"latitude":5,"longitude":2,"utc_timestamp":1}]}"#,
            ] {
                let reply = try await client.post("/v1/devices/dup/locations", json: body)
                #expect(reply.status == 400, "\(reply.text)")
                #expect(reply.json?["error"]?["reason"] == .string("invalid_json"), "\(reply.text)")
                #expect(reply.text.contains("appears twice"), "\(reply.text)")
            }
            let enriched = try await client.post(
                "/v1/enrich",
                json: #"{"device_id":"dup","payload":{"aps":{"alert":"a","alert":"b"}}}"#)
            #expect(enriched.status == 400, "\(enriched.text)")
            #expect(enriched.json?["error"]?["reason"] == .string("invalid_json"))
        }
    }

    @Test("callback_url: ports 0 and over 65535, spaces and control characters are refused naming the field")
    func callbackURLs() async throws {
        try await withDelivery({ $0.delivery.callbackHosts = ["127.0.0.1"] }) { client, _, _ in
            for (url, said) in [
                ("http://127.0.0.1:99999/cb", "port 99999"), ("http://127.0.0.1:65536/cb", "port 65536"),
                ("http://127.0.0.1:0/cb", "port 0"), ("http://127.0.0.1/c b", "space"),
                (#"http://127.0.0.1/c\tb"#, "U+9"), (#"http://127.0.0.1/c\u0000"#, "U+0"),
            ] {
                let reply = try await client.post(
                    "/v1/push", json: pushBody(devices: ["a"], extra: #""callback_url":"\#(url)""#))
                #expect(reply.status == 400, "\(url): \(reply.text)")
                #expect(reply.json?["error"]?["field"] == .string("callback_url"), "\(url)")
                #expect(reply.json?["error"]?["message"]?.stringValue?.contains(said) == true, "\(url): \(reply.text)")
            }
            let fine = try await client.post(
                "/v1/push", json: pushBody(devices: ["a"], extra: #""callback_url":"http://127.0.0.1:65535/cb""#))
            #expect(fine.status == 200 || fine.status == 202, "\(fine.text)")
        }
    }

    @Test("a visit's arrival at or after 4001-01-01 is refused per item, not a trap")
    func visitArrivalBounded() async throws {
        try await withService { client in
            let reply = try await client.post(
                "/v1/devices/far/visits",
                json:
                    #"{"visits":[{"arrival":1e300,"departure":1.1e300,"latitude":48,"longitude":2,"horizontal_accuracy":10}]}"#
            )
            #expect(reply.status == 200, "\(reply.text)")
            #expect(reply.text.contains("arrival must be before 4001-01-01"), "\(reply.text)")
            #expect(try await client.get("/health/live").status == 200)
        }
    }
}
