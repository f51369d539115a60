import EnrichmentCore
import Essentials
import Foundation
import Testing

@Suite("OpenLocate batches")
struct OpenLocateBatchTests {
    let now = 1_700_000_000.0

    /// The batch from the decoded document; the route's reading straight from the bytes must give the same batch,
    /// or the same error.
    func parse(_ json: String) throws -> OpenLocateBatch {
        let streamed = Result { try OpenLocateBatch.parse(json: Data(json.utf8), deviceId: "d1", receivedAt: now) }
        let decoded = Result {
            try OpenLocateBatch.parse(JSONValue.decode(Data(json.utf8)), deviceId: "d1", receivedAt: now)
        }
        switch (streamed, decoded) {
        case (.success(let a), .success(let b)):
            #expect(a.accepted == b.accepted, "\(json)")
            #expect(a.rejected == b.rejected, "\(json)")
        case (.failure(let a), .failure(let b)):
            #expect(String(describing: a) == String(describing: b), "\(json)")
        default:
            Issue.record("the two readings disagree on \(json): \(streamed) against \(decoded)")
        }
        return try decoded.get()
    }

    @Test("numbers and numeric strings are both accepted")
    func accepted() throws {
        let batch = try parse(
            #"{"locations":[{"latitude":"48.85","longitude":2.35,"utc_timestamp":1699999990,"horizontal_accuracy":"12.5","location_context":"regular"},{"latitude":1,"longitude":"2","utc_timestamp":"1699999999"}]}"#
        )
        #expect(batch.rejected.isEmpty)
        #expect(batch.accepted.count == 2)
        #expect(batch.accepted[0].coordinate == Coordinate(latitude: 48.85, longitude: 2.35))
        #expect(batch.accepted[0].horizontalAccuracy == 12.5)
        #expect(batch.accepted[0].context == "regular")
        #expect(batch.accepted[1].fixTime == 1_699_999_999)
    }

    @Test("each bad item is rejected with its index and reason; good items are kept")
    func rejections() throws {
        let batch = try parse(
            #"""
            {"locations":[
              {"latitude":91,"longitude":0,"utc_timestamp":1699999990},
              {"latitude":0,"longitude":-181,"utc_timestamp":1699999990},
              {"longitude":0,"utc_timestamp":1699999990},
              {"latitude":"north","longitude":0,"utc_timestamp":1699999990},
              {"latitude":0,"longitude":0,"utc_timestamp":1699999990000},
              {"latitude":0,"longitude":0,"utc_timestamp":1800000000},
              {"latitude":0,"longitude":0,"utc_timestamp":1699999990,"horizontal_accuracy":-1},
              "nope",
              {"latitude":0,"longitude":0,"utc_timestamp":1699999990}
            ]}
            """#)
        #expect(batch.accepted.count == 1)
        let reasons = Dictionary(uniqueKeysWithValues: batch.rejected.map { ($0.index, $0.reason) })
        #expect(reasons[0] == "latitude 91.0 is outside [-90, 90]")
        #expect(reasons[1] == "longitude -181.0 is outside [-180, 180]")
        #expect(reasons[2] == "latitude is missing")
        #expect(reasons[3] == "latitude must be a number or numeric string, found string")
        #expect(reasons[4]?.contains("milliseconds") == true)
        #expect(reasons[5]?.contains("in the future") == true)
        #expect(reasons[6] == "horizontal_accuracy must be a non-negative number")
        #expect(reasons[7] == "item must be an object, found string")
        #expect(reasons[8] == nil)
    }

    @Test("a body without a locations array is refused as a whole")
    func wholeBatch() {
        #expect(throws: OpenLocateError.missingLocations) { try parse(#"{"fixes":[]}"#) }
        #expect(throws: OpenLocateError.locationsNotArray(found: "object")) { try parse(#"{"locations":{}}"#) }
        #expect(throws: OpenLocateError.notAnObject(found: "array")) { try parse(#"[]"#) }
    }

    @Test("the body read item by item gives what the decoded document gives, errors included")
    func readFromBytes() throws {
        let item = #"{"latitude":48.8,"longitude":2.3,"utc_timestamp":1699999990}"#
        let bodies = [
            #"{"locations":[]}"#, #" {"locations" : [ ] } "#, #"{"locations":[\#(item)],"app":"x"}"#,
            #"{"app":{"nested":[1,2]},"locations":[\#(item),\#(item)]}"#,
            // OpenLocate's other fields, typed and ill-typed; unknown fields ignored.
            #"{"locations":[{"latitude":1,"longitude":2,"utc_timestamp":1699999990,"speed":"3.5","is_charging":"true","wifi_bssid":"A4:2B:B0:12:34:56","x":{"y":[]}}]}"#,
            #"{"locations":[{"latitude":1,"longitude":2,"utc_timestamp":1699999990,"course":400}]}"#,
            #"{"locations":[{"latitude":1,"longitude":2,"utc_timestamp":1699999990,"location_context":null,"horizontal_accuracy":null}]}"#,
            #"{"locations":[{"latitude":1,"longitude":2,"utc_timestamp":1699999990,"location_context":"a\u0001"}]}"#,
            #"{"locations":[{}, [], 1, null, "x", {"latitude":1e400}]}"#,
            // Not JSON, or not the batch's shape.
            #"{"locations":[{"latitude":1,"latitude":2}]}"#, #"{"locations":[],"locations":[]}"#,
            #"{"locations":1,"locations":[]}"#, #"{"locations":[\#(item)]"#, #"{"locations":[\#(item)]} x"#,
            #"{"locations":[{"latitude":01}]}"#, #"{"locations":[\#(item),]}"#, #"[1,"#, #"nul"#, #""x""#, "42",
            #"{"locations":"many"}"#, #"{"locations":null}"#, #"{}"#,
            #"{"locations":[\#(String(repeating: "[", count: 200))]}"#,
        ]
        for body in bodies { _ = try? parse(body) }
        // More items than a batch takes: refused with their count, a JSON error after them still first.
        let many =
            "{\"locations\":[" + Array(repeating: item, count: OpenLocateBatch.maximumItems + 2).joined(separator: ",")
        #expect(throws: OpenLocateError.tooManyItems(count: OpenLocateBatch.maximumItems + 2, limit: 10_000)) {
            try parse(many + "]}")
        }
        #expect(throws: JSONParseError.self) { try parse(many + "]") }
    }
}
