import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Every `POST /v1/push` member that becomes an HTTP/2 header, at 0, 1, the limit, the limit + 1 and 1 MB characters
/// (and with the characters a header cannot carry): each push is accepted and delivered, or refused with a 400
/// naming the member. No value reaches the connection the pushes share, so none fails a delivery.
@Suite("Push header fields at their limits")
struct PushFieldTests {
    static let megabyte = 1 << 20

    /// A JSON string literal of `text` (escaped).
    static func quoted(_ text: String) -> String {
        String(decoding: JSONValue.string(text).encodedData(), as: UTF8.self)
    }

    /// (member, JSON value, accepted?)
    static var cases: [(field: String, value: String, accepted: Bool)] {
        var cases: [(String, String, Bool)] = []
        func strings(_ field: String, limit: Int, filler: Character = "a", prefix: String = "") {
            for (count, accepted) in [(0, false), (1, true), (limit, true), (limit + 1, false), (megabyte, false)] {
                let body = count == 0 ? "" : prefix + String(repeating: filler, count: max(0, count - prefix.count))
                cases.append((field, quoted(String(body.prefix(count))), accepted))
            }
            // A header value cannot hold a control character or start or end with a space; a topic (a bundle id)
            // holds no space at all, while a collapse id may have one inside.
            cases.append((field, quoted("a b"), field == "collapse_id"))
            for bad in ["a\nb", "a\r\nx-evil: 1", "a\u{0}b", "\u{7f}", "a\tb", " a", "a "] {
                cases.append((field, quoted(bad), false))
            }
        }
        strings("topic", limit: 255, prefix: "com.example.")
        strings("collapse_id", limit: 64)
        cases.append(("collapse_id", quoted(String(repeating: "é", count: 32)), true))  // 64 bytes
        cases.append(("collapse_id", quoted(String(repeating: "é", count: 33)), false))  // 66 bytes
        cases.append(("topic", quoted("com.example.é"), false))
        for (value, accepted) in [
            ("", false), ("a", false), ("alert", true), ("background", true),
            (String(repeating: "a", count: megabyte), false),
        ] {
            cases.append(("push_type", quoted(value), accepted))
        }
        for (value, accepted) in [
            ("0", false), ("1", true), ("5", true), ("10", true), ("11", false), ("-1", false),
            ("9223372036854775807", false), ("\"10\"", false),
        ] {
            cases.append(("priority", value, accepted))
        }
        for (value, accepted) in [
            ("0", true), ("9999999999", true), ("9223372036854775807", true), ("-1", false), ("\"0\"", false),
            (quoted(String(repeating: "9", count: megabyte)), false),
        ] {
            cases.append(("expiration", value, accepted))
        }
        return cases
    }

    @Test("an unknown member is refused as on /v1/enrich: 400 unknown_field, naming it")
    func unknownMember() async throws {
        try await withDelivery { client, _, _ in
            let reply = try await client.post("/v1/push", json: pushBody(devices: ["x"], extra: #""colapse_id":"c""#))
            #expect(reply.status == 400)
            #expect(reply.errorReason == "unknown_field")
            #expect(reply.json?["error"]?["field"] == .string("colapse_id"))
            let enrich = try await client.post(
                "/v1/enrich", json: #"{"device_id":"x","payload":{"aps":{}},"windw":60}"#)
            #expect(enrich.errorReason == reply.errorReason)
        }
    }

    @Test("each value is accepted and delivered, or refused naming its field; deliveries never fail on a value")
    func fieldsAtTheirLimits() async throws {
        try await withDelivery({ $0.maxBodyBytes = 8 << 20 }) { client, sandbox, _ in
            _ = try await register(client, "fuzz", deviceToken(900))
            var accepted = 0
            for (field, value, shouldAccept) in Self.cases {
                // A background push needs priority 5 and no alert; the others are alerts.
                let payload =
                    field == "push_type" && value.contains("background")
                    ? #"{"aps":{"content-available":1}}"#
                    : locationPayload(timestamp: String(Int64(Date().timeIntervalSince1970)))
                let body = pushBody(devices: ["fuzz"], payload: payload, extra: #""wait":true,"\#(field)":\#(value)"#)
                let reply = try await client.post("/v1/push", json: body)
                let label = "\(field)=\(value.prefix(40))… (\(value.utf8.count) bytes)"
                if shouldAccept {
                    #expect(reply.status == 200, "\(label): \(reply.text.prefix(400))")
                    let state = firstDelivery(devices(reply)["fuzz"])?["state"]?.stringValue
                    #expect(state == "delivered", "\(label): \(reply.text.prefix(400))")
                    accepted += 1
                } else {
                    #expect(reply.status == 400, "\(label): \(reply.status) \(reply.text.prefix(400))")
                    #expect(reply.json?["error"]?["field"] == .string(field), "\(label): \(reply.text.prefix(400))")
                }
            }
            // Every accepted push reached the mock, over connections no value broke.
            #expect(accepted == 14)
            #expect(sandbox.receivedCount == accepted)
        }
    }
}
