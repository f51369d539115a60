import EnrichmentCore
import Essentials
import Foundation
import Synchronization
import Testing

/// `import-pois` reads its file a piece at a time (issue 28): the same POIs, counts and rejections as reading it
/// whole, whatever the chunk boundaries cut through.
@Suite("POI import, streamed")
struct POIStreamTests {
    static let csv = """
        store_id,name,lat,lng,city,zipcode,country_code,address,types,tags
        s1,"Café ""Le Zinc"", Paris",48.85,2.35,Paris,75001,FR,"1 rue A|Bât B",cafe;bar,open
        s2,No coords,,2.35,Paris,,,,,
        s3,"Multi
        line",48.86,2.36,Paris,,,,shop,
        s4,Bad,95,0,,,,,,
        s1,Again,48.9,2.4,,,,,,
        s5,Last,1,2,,,,,,
        """

    @Test("records cut at every byte boundary read the same as the whole text")
    func chunkBoundaries() throws {
        let bytes = Array(("\u{FEFF}" + Self.csv).utf8)
        var whole = CSVRecordReader(data: Data(bytes))
        var expected: [[String]] = []
        while let record = try whole.next() { expected.append(record.fields) }
        for size in [1, 2, 3, 5, 7, 64] {
            var offset = 0
            var reader = CSVRecordReader {
                guard offset < bytes.count else { return nil }
                defer { offset += size }
                return Array(bytes[offset..<min(bytes.count, offset + size)])
            }
            var records: [[String]] = []
            while let record = try reader.next() { records.append(record.fields) }
            #expect(records == expected, "chunks of \(size) bytes")
        }
    }

    @Test("a streamed CSV hands on its POIs in chunks and counts as a whole read does", arguments: [1, 2, 100])
    func streamedCSV(chunk: Int) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("s-\(UUID().uuidString).csv").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(Self.csv.utf8).write(to: URL(fileURLWithPath: path))
        let whole = try POICSV.parse(Data(Self.csv.utf8))
        let handed = Mutex<[[POI]]>([])
        let streamed = try POIBatch.stream(path: path, format: .csv(nil), chunk: chunk) { pois in
            handed.withLock { $0.append(pois) }
        }
        let chunks = handed.withLock { $0 }
        #expect(chunks.allSatisfy { $0.count <= chunk })
        #expect(chunks.flatMap { $0 } == whole.pois)
        #expect(streamed.pois.isEmpty)
        let now = streamed.report(total: 4, seconds: 0, format: .csv(nil))
        let before = whole.report(total: 4, seconds: 0, format: .csv(nil))
        #expect(now == before)
        #expect(now.upserted == 4)
        #expect(now.repeatedStoreIds == 1)
        #expect(now.rejectedCount == 2)
    }

    @Test("a streamed GeoJSON hands on its features in chunks; an error of the writer stops the read")
    func streamedGeoJSON() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("s-\(UUID().uuidString).geojson")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let features = (0..<10).map { i in
            #"{"type":"Feature","properties":{"store_id":"g\#(i)","name":"G\#(i)"},"geometry":{"type":"Point","coordinates":[2,\#(40 + i)]}}"#
        }
        try Data(#"{"features":[\#(features.joined(separator: ","))],"type":"FeatureCollection"}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        let handed = Mutex<[String]>([])
        let batch = try POIBatch.stream(path: path, format: .geoJSON, chunk: 3) { pois in
            handed.withLock { $0 += pois.map(\.storeId) }
        }
        #expect(handed.withLock { $0 } == (0..<10).map { "g\($0)" })
        #expect(batch.report(total: 10, seconds: 0, format: .geoJSON).upserted == 10)
        struct Full: Error {}
        #expect(throws: Full.self) {
            try POIBatch.stream(path: path, format: .geoJSON, chunk: 3) { _ in throw Full() }
        }
    }

    @Test("chunks pass from a reading thread to a writer, at most two waiting; a writer that stops ends the reader")
    func chunksBetweenThreads() throws {
        let chunks = POIChunks(depth: 2)
        let poi = POI(storeId: "x", name: "x", coordinate: Coordinate(latitude: 1, longitude: 2))
        let thread = Thread {
            for _ in 0..<50 { try? chunks.put([poi]) }
            chunks.finish()
        }
        thread.start()
        var count = 0
        while let chunk = try chunks.next() { count += chunk.count }
        #expect(count == 50)

        let stopped = POIChunks(depth: 1)
        let ended = Mutex<(any Error)?>(nil)
        let reader = Thread {
            do {
                for _ in 0..<50 { try stopped.put([poi]) }
            } catch { ended.withLock { $0 = error } }
            stopped.finish()
        }
        reader.start()
        _ = try stopped.next()
        stopped.cancel()
        let deadline = Date().addingTimeInterval(5)
        while ended.withLock({ $0 }) == nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(ended.withLock { $0 } is POIChunks.Cancelled)
    }
}
