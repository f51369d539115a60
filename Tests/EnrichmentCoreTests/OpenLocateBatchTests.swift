import EnrichmentCore
import Essentials
import Foundation
import Testing

@Suite("OpenLocate batches")
struct OpenLocateBatchTests {
    let now = 1_700_000_000.0

    func parse(_ json: String) throws -> OpenLocateBatch {
        try OpenLocateBatch.parse(JSONValue.decode(Data(json.utf8)), deviceId: "d1", receivedAt: now)
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
}
