import EnrichmentCore
import Essentials
import Foundation
import Testing

/// Imports whose memory must follow the POIs kept, not the size or shape of the file.
@Suite("POI import: bounded memory")
struct POIImportBoundsTests {
    @Test("a line of commas is refused at the field limit instead of becoming millions of strings")
    func lineOfCommas() throws {
        let csv = "store_id,lat,lng\n" + String(repeating: ",", count: 50_000)
        #expect(
            throws: POIImportError.csv(
                line: 2, reason: "a record has more than 1000 fields; check the separator (a comma) and the quoting")
        ) {
            try POICSV.parse(Data(csv.utf8))
        }
        let wide = "store_id,lat,lng\n" + "a,1,2" + String(repeating: ",", count: CSVRecordReader.maximumFields - 3)
        #expect(try POICSV.parse(Data(wide.utf8)).pois.count == 1)
    }

    @Test("skipped rows are counted by reason; only the first 100 are kept")
    func rejectionsAreBounded() throws {
        var csv = "store_id,lat,lng\n"
        for index in 0..<5_000 { csv += index % 2 == 0 ? "s\(index),,1\n" : "s\(index),1,999\n" }
        csv += "ok,1,2\n"
        let batch = try POICSV.parse(Data(csv.utf8))
        #expect(batch.pois.map(\.storeId) == ["ok"])
        #expect(batch.rejectedCount == 5_000)
        #expect(batch.rejected.count == POIImportReport.listedProblems)
        #expect(batch.rejected.first == .init(index: 2, reason: "lat is empty"))
        #expect(batch.rejectedByReason == ["lat is empty": 2_500, "lng is outside [-180, 180]": 2_500])
        let report = batch.report(total: 1, seconds: 0, format: .csv(nil))
        #expect(report.rejectedCount == 5_000)
        #expect(report.rejected.count == 100)
    }

    @Test("a file over the row limit is refused, naming the limit", arguments: [false, true])
    func rowLimit(geoJSON: Bool) {
        let data: Data
        if geoJSON {
            data = Data(
                (#"{"type":"FeatureCollection","features":["# + Array(repeating: "{}", count: 11).joined(separator: ",")
                    + "]}").utf8)
        } else {
            data = Data(("store_id,lat,lng\n" + String(repeating: "x,1,2\n", count: 11)).utf8)
        }
        #expect(throws: POIImportError.tooManyRows(limit: 10, at: geoJSON ? 10 : 12)) {
            try POIBatch.read(data, format: geoJSON ? .geoJSON : .csv(nil), rowLimit: 10)
        }
        #expect(throws: Never.self) { try POIBatch.read(data, format: geoJSON ? .geoJSON : .csv(nil), rowLimit: 11) }
    }

    @Test("GeoJSON features are read one by one with their index; the collection's shape is still checked")
    func streamingGeoJSON() throws {
        let feature =
            #"{"type":"Feature","properties":{"store_id":"a","name":"A"},"geometry":{"type":"Point","coordinates":[2.35,48.85]}}"#
        let document =
            #"{"features":[\#(feature), {}, 7, \#(feature.replacingOccurrences(of: "\"a\"", with: "\"b\""))],"type":"FeatureCollection","extra":{"x":[1]}}"#
        let batch = try POIBatch.read(Data(document.utf8), format: .geoJSON)
        #expect(batch.pois.map(\.storeId) == ["a", "b"])
        #expect(batch.rejected.map(\.index) == [1, 2])
        #expect(batch.rejected.first?.reason == "properties must be an object")

        let cases: [(String, String)] = [
            (#"[1]"#, "body must be a JSON object"),
            (#"{"type":"Feature","features":[]}"#, "type must be \"FeatureCollection\""),
            (
                #"{"type":"FeatureCollection","features":{}}"#,
                "features must be an array of GeoJSON Features, found object"
            ),
            (#"{"type":"FeatureCollection"}"#, "features must be an array of GeoJSON Features (it is missing)"),
            (#"{"features":[{"a":1},"#, "not valid JSON"),
        ]
        for (text, expected) in cases {
            do {
                _ = try POIBatch.read(Data(text.utf8), format: .geoJSON)
                Issue.record("accepted \(text)")
            } catch {
                #expect(error.description.contains(expected), "\(text): \(error.description)")
            }
        }
    }

    @Test("streamed and whole-document reads agree on the same collection")
    func streamedMatchesTree() throws {
        var features: [String] = []
        for index in 0..<200 {
            let lat = Double(index % 180) - 89.5
            features.append(
                #"{"type":"Feature","properties":{"store_id":"s\#(index)","name":"N\#(index)","types":["t\#(index % 3)"]},"geometry":{"type":"Point","coordinates":[\#(Double(index) - 100.25),\#(lat)]}}"#
            )
        }
        features.append(#"{"properties":{}}"#)
        let text = #"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#
        let streamed = try POIBatch.read(Data(text.utf8), format: .geoJSON)
        let tree = try WoosmapFormat.parseFeatureCollection(JSONValue.decode(Data(text.utf8)))
        #expect(streamed.pois == tree.pois)
        #expect(streamed.rejected == tree.rejected)
    }
}
