import EnrichmentCore
import Essentials
import Foundation
import Testing

@Suite("Reading APNs payloads")
struct NotificationPayloadTests {
    func payload(_ json: String) throws -> NotificationPayload { try NotificationPayload(data: Data(json.utf8)) }

    @Test("woosmap reads an integer aps.timestamp")
    func woosmapInteger() throws {
        let reading = try payload(#"{"aps":{"timestamp":1589288354}}"#).readTimestamp(mode: .woosmap)
        #expect(reading.timestamp == 1_589_288_354)
        #expect(reading.source == .apsInteger)
    }

    @Test("woosmap treats a string aps.timestamp as no timestamp")
    func woosmapString() throws {
        let reading = try payload(#"{"aps":{"timestamp":"1589288354"}}"#).readTimestamp(mode: .woosmap)
        #expect(reading.timestamp == nil)
        #expect(reading.problem?.contains("string") == true)
    }

    @Test("woosmap treats a fractional number as no timestamp, an integral one as an integer")
    func woosmapFloat() throws {
        #expect(try payload(#"{"aps":{"timestamp":1589288354.5}}"#).readTimestamp(mode: .woosmap).timestamp == nil)
        #expect(
            try payload(#"{"aps":{"timestamp":1589288354.0}}"#).readTimestamp(mode: .woosmap).timestamp == 1_589_288_354
        )
    }

    @Test("woosmap ignores the top-level legacy shape")
    func woosmapLegacy() throws {
        let p = try payload(#"{"location":"1","timestamp":"1589288354","aps":{}}"#)
        #expect(p.readTimestamp(mode: .woosmap).timestamp == nil)
        #expect(p.locationRequest(mode: .woosmap).wanted == false)
    }

    @Test("default accepts the legacy top-level shape and says so")
    func defaultLegacy() throws {
        let p = try payload(#"{"location":"1","timestamp":"1589288354"}"#)
        let reading = p.readTimestamp(mode: .default)
        #expect(reading.timestamp == 1_589_288_354)
        #expect(reading.source == .legacyTopLevel)
        #expect(p.locationRequest(mode: .default) == (true, true))
    }

    @Test("default accepts numeric strings and floors fractional numbers")
    func defaultLenient() throws {
        #expect(
            try payload(#"{"aps":{"timestamp":"1589288354"}}"#).readTimestamp(mode: .default).timestamp == 1_589_288_354
        )
        #expect(
            try payload(#"{"aps":{"timestamp":1589288354.9}}"#).readTimestamp(mode: .default).timestamp == 1_589_288_354
        )
        #expect(try payload(#"{"aps":{"timestamp":"soon"}}"#).readTimestamp(mode: .default).timestamp == nil)
    }

    @Test("aps.timestamp wins over the legacy key in default mode")
    func apsWins() throws {
        let reading = try payload(#"{"timestamp":"1","aps":{"timestamp":1589288354}}"#).readTimestamp(mode: .default)
        #expect(reading.timestamp == 1_589_288_354)
        #expect(reading.source == .apsInteger)
    }

    @Test("a payload must be an object with an object aps")
    func shapes() {
        #expect(throws: PayloadError.notAnObject(found: "array")) { try payload("[1]") }
        #expect(throws: PayloadError.apsNotAnObject(found: "string")) { try payload(#"{"aps":"x"}"#) }
    }

    @Test("replacing the body keeps title, subtitle and unknown keys")
    func replaceBody() throws {
        let p = try payload(
            #"{"aps":{"alert":{"title":"T","subtitle":"S","body":"old"},"mutable-content":1},"custom":{"k":[1,2]}}"#)
        let out = p.replacingBody("new")
        #expect(out.alert == Alert(title: "T", subtitle: "S", body: "new"))
        #expect(out.json["custom"] == p.json["custom"])
        #expect(out.isMutable)
    }

    @Test("a string alert stays a string")
    func stringAlert() throws {
        let out = try payload(#"{"aps":{"alert":"hello"}}"#).replacingBody("bye")
        #expect(out.json["aps"]?["alert"] == .string("bye"))
    }
}

@Suite("A measured payload")
struct MeasuredPayloadTests {
    @Test("knows its size until it changes; equality ignores whether it was measured")
    func measuredSize() throws {
        let payload = try NotificationPayload(
            json: .object(["aps": .object(["alert": .object(["title": .string("T"), "body": .string("Bé")])])]))
        let measured = payload.measured()
        #expect(measured.encodedSize == JSONWriter.bytes(payload.json).count)
        #expect(measured == payload)
        let longer = measured.replacingBody("a much longer body than before")
        #expect(longer.encodedSize == JSONWriter.bytes(longer.json).count)
        #expect(longer.encodedSize > measured.encodedSize)
        let more = measured.setting("extra", to: .string("x"))
        #expect(more.encodedSize == JSONWriter.bytes(more.json).count)
    }
}
