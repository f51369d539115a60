import EnrichmentCore
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
        let (out, truncated) = try PayloadFitter.fit(body: body, into: base())
        #expect(truncated == false)
        #expect(try size(out) == 4096)
        #expect(out.alert.body == body)
    }

    @Test("one byte more is shortened to fit, ending with an ellipsis")
    func exactly4097() throws {
        let empty = try size(base().replacingBody(""))
        let body = String(repeating: "a", count: 4097 - empty)
        let (out, truncated) = try PayloadFitter.fit(body: body, into: base())
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
        let (out, truncated) = try PayloadFitter.fit(body: body, into: base())
        #expect(truncated)
        #expect(try size(out) <= 4096)
        #expect(body.hasPrefix(String(out.alert.body!.dropLast())))
    }

    @Test("a payload that cannot fit even with an empty body is an error")
    func cannotFit() throws {
        let big = try NotificationPayload(json: .object([
            "aps": .object(["alert": .object(["body": .string("")])]),
            "blob": .string(String(repeating: "x", count: 4100)),
        ]))
        #expect(throws: PayloadError.self) { try PayloadFitter.fit(body: "hi", into: big) }
    }
}
