import EnrichmentCore
import Essentials
import Foundation
import Testing

@Suite("The 4096-byte payload limit")
struct PayloadFitterTests {
    /// A payload whose encoded size with body `body` is known: we measure the empty-body size and pad.
    func base() throws -> NotificationPayload {
        try NotificationPayload(data: Data(#"{"aps":{"alert":{"title":"T","body":""},"mutable-content":1}}"#.utf8))
    }

    func size(_ p: NotificationPayload) throws -> Int { p.encoded().count }

    @Test("a body that makes exactly 4096 bytes is kept whole")
    func exactly4096() throws {
        let empty = try size(base().replacingBody(""))
        let body = String(repeating: "a", count: 4096 - empty)
        let (out, truncated, reported) = try PayloadFitter.fit(body: body, into: base())
        #expect(reported == out.encoded().count)
        #expect(truncated == false)
        #expect(try size(out) == 4096)
        #expect(out.alert.body == body)
    }

    @Test(
        "written once: the bytes are the fitted payload's JSON, and a body too long is cut as fit cuts it",
        arguments: [10, 4096, 4097, 6000])
    func fitEncoded(target: Int) throws {
        let empty = try size(base().replacingBody(""))
        let body = String(repeating: "é", count: max(1, (target - empty) / 2)) + "x"
        let (out, truncated, bytes) = try PayloadFitter.fitEncoded(body: body, into: base())
        let (expected, expectedTruncated, expectedSize) = try PayloadFitter.fit(body: body, into: base())
        #expect(bytes == Array(out.encoded()))
        #expect(bytes.count == expectedSize)
        #expect(bytes.count <= 4096)
        #expect(out == expected)
        #expect(truncated == expectedTruncated)
    }

    @Test("one byte more is shortened to fit, ending with an ellipsis")
    func exactly4097() throws {
        let empty = try size(base().replacingBody(""))
        let body = String(repeating: "a", count: 4097 - empty)
        let (out, truncated, reported) = try PayloadFitter.fit(body: body, into: base())
        #expect(reported == out.encoded().count)
        #expect(truncated)
        #expect(try size(out) <= 4096)
        #expect(out.alert.body?.hasSuffix("…") == true)
        // 1 byte over, and the ellipsis costs 3 bytes: 4 ASCII characters must go.
        let kept = out.alert.body!.dropLast().count
        #expect(kept == body.count - 4)
    }

    @Test("multi-byte characters are never split")
    func multibyte() throws {
        let body = String(repeating: "é🙂", count: 2000)
        let (out, truncated, reported) = try PayloadFitter.fit(body: body, into: base())
        #expect(reported == out.encoded().count)
        #expect(truncated)
        #expect(try size(out) <= 4096)
        #expect(body.hasPrefix(String(out.alert.body!.dropLast())))
    }

    @Test("escaped characters are counted as APNs counts them", arguments: ["\"", "\\", "\n", "\u{1}", "é", "🙂"])
    func escapes(unit: String) throws {
        for count in [100, 1_000, 1_363, 1_364, 1_365, 4_000] {
            let (out, _, reported) = try PayloadFitter.fit(body: String(repeating: unit, count: count), into: base())
            #expect(reported == out.encoded().count)
            #expect(reported <= 4096)
        }
    }

    @Test("a payload that cannot fit even with an empty body is an error")
    func cannotFit() throws {
        let big = try NotificationPayload(
            json: .object([
                "aps": .object(["alert": .object(["body": .string("")])]),
                "blob": .string(String(repeating: "x", count: 4100)),
            ]))
        #expect(throws: PayloadError.self) { try PayloadFitter.fit(body: "hi", into: big) }
    }
}
