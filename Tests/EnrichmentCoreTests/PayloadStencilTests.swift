import Essentials
import Foundation
import Testing

@testable import EnrichmentCore

/// A push's payload written once around the body and the map URL (`PayloadStencil`): each device's bytes are
/// those of the whole edited document written out (`JSONWriter`, sorted keys), whatever the document holds.
@Suite("Payload stencil")
struct PayloadStencilTests {
    static let payloads = [
        #"{"aps":{"alert":{"title":"Hello","subtitle":"Sub","body":"Original"},"mutable-content":1,"category":"location","timestamp":1}}"#,
        // The body as the whole alert; keys before, between and after `aps` and `attachment-url`.
        #"{"a":1,"aps":{"alert":"Plain","mutable-content":1},"apt":"x","attachment":null,"zz":[1,"two",{"k":"v"}]}"#,
        // An attachment-url of its own: replaced with a map, kept without one.
        #"{"aps":{"alert":{"body":"B","loc-args":["a\"b"]},"mutable-content":1},"attachment-url":"https://old/x.png"}"#,
        // No alert at all: the body becomes the alert.
        #"{"aps":{"mutable-content":1,"sound":"default"},"data":{"nested":{"deep":"\u00e9\n"}}}"#,
    ]
    static let bodies = [
        "Café du Centre is 135 m away", "", "quotes \" and \\ backslash", "lines\nand\ttabs\u{1}", "emoji 🗺️ ✓",
    ]
    static let attachments: [String?] = [
        nil, "https://maps.googleapis.com/maps/api/staticmap?size=600x300&markers=color:red%7C43.6,3.88&key=K",
        "weird \"url\"\n",
    ]

    @Test("each device's bytes are the whole edited document's, with and without a map", arguments: payloads)
    func sameBytes(text: String) throws {
        let payload = try NotificationPayload(data: Data(text.utf8))
        let stencil = try #require(PayloadStencil(payload))
        for body in Self.bodies {
            for attachment in Self.attachments {
                var edited = payload
                if let attachment { edited = edited.setting(Enricher.attachmentKey, to: .string(attachment)) }
                let expected = JSONWriter.bytes(edited.replacingBody(body).json)
                let rendered = stencil.render(body: body, attachment: attachment, limit: 4096)
                #expect(
                    rendered == expected, "body \(body.debugDescription), attachment \(String(describing: attachment))")
            }
        }
    }

    @Test("over the limit it gives nothing (the body is then shortened as without a stencil)")
    func overLimit() throws {
        let payload = try NotificationPayload(data: Data(Self.payloads[0].utf8))
        let stencil = try #require(PayloadStencil(payload))
        let body = String(repeating: "x", count: 100)
        let size = JSONWriter.bytes(payload.replacingBody(body).json).count
        #expect(stencil.render(body: body, attachment: nil, limit: size)?.count == size)
        #expect(stencil.render(body: body, attachment: nil, limit: size - 1) == nil)
    }

    @Test("a payload that already holds the marker text gets no stencil")
    func markerInPayload() throws {
        let payload = try NotificationPayload(
            json: .object([
                "aps": .object(["alert": .string("x"), "mutable-content": .int(1)]),
                "echo": .string("\u{FFFF}enrichment-body-hole\u{FFFF}"),
            ]))
        #expect(PayloadStencil(payload) == nil)
        #expect(payload.stenciled().stencil == nil)
    }

    @Test("a change to a stenciled payload forgets the stencil")
    func changeForgets() throws {
        let payload = try NotificationPayload(data: Data(Self.payloads[0].utf8)).stenciled()
        #expect(payload.stencil != nil)
        #expect(payload.replacingBody("other").stencil == nil)
    }

    @Test("an enrichment over the limit with a stencil is shortened as without one")
    func truncatedLikeWithout() async throws {
        let long = String(repeating: "Long name ", count: 420)
        let store = MemoryFixStore()
        try await store.insert([
            LocationFix(
                deviceId: "d1", coordinate: Coordinate(latitude: 43.6, longitude: 3.88), fixTime: 1_000,
                receivedAt: 1_000)
        ])
        let places = ScriptedPlaces(
            result: .success([
                PlaceMatch(
                    poi: POI(storeId: "s1", name: long, coordinate: Coordinate(latitude: 43.601, longitude: 3.881)),
                    distance: 120)
            ]))
        let enricher = Enricher(
            settings: EnrichmentSettings(), fixes: store, places: places, map: try StaticMapBuilder(apiKey: "K"),
            template: try BodyTemplate(), clock: FixedWallClock(epochSeconds: 1_010))
        let payload = try NotificationPayload(
            data: Data(
                #"{"aps":{"alert":{"title":"T","body":"B"},"mutable-content":1,"category":"location","timestamp":1005}}"#
                    .utf8))
        let plain = try await enricher.enrich(deviceId: "d1", payload: payload)
        let stenciled = try await enricher.enrich(deviceId: "d1", payload: payload.measured().stenciled())
        #expect(plain.bodyTruncated)
        #expect(stenciled.bodyTruncated)
        #expect(stenciled.encoded == plain.encoded)
        #expect(stenciled.notification.body == plain.notification.body)
        #expect(stenciled.payload == plain.payload)
    }
}
