import Essentials
import Foundation
import TestSupport
import Testing

@testable import EnrichmentCore

/// The local index hands its matches on as packed records, and the answer writes their POIs from the record's bytes
/// (`PackedPOIRecord`): the same POIs, members and escaping as from a decoded POI.
@Suite("Matches from the packed index")
struct PackedMatchTests {
    static let now: Int64 = 1_700_000_000
    let user = Coordinate(latitude: 48.8566, longitude: 2.3522)

    /// POIs around the user whose strings need every kind of escape, with missing and present optional fields.
    func awkwardPOIs() -> [POI] {
        let names = [
            "Café \"Le Zinc\"", "back\\slash and a long tail of plain text", "line\nbreak\ttab", "\u{1}control\u{1F}",
            "😀 emoji café", "", "plain ascii name, longer than eight bytes", "short",
        ]
        return names.enumerated().map { i, name in
            POI(
                storeId: "id-\(i)-\"q\"", name: name,
                coordinate: Coordinate(latitude: 48.8566 + Double(i) * 0.0007, longitude: 2.3522 - Double(i) * 0.0005),
                address: POI.Address(
                    lines: ["\(i) rue de Rivoli", "line \"two\""], countryCode: i % 2 == 0 ? "FR" : nil,
                    city: i % 3 == 0 ? nil : "Paris \\ \(i)",
                    zipcode: i == 4 ? "7500\u{2}1" : (i % 2 == 0 ? "75001" : nil)),
                types: i % 4 == 0 ? [] : ["cafe", "bar \"x\""], tags: i == 3 ? ["a\nb", "c"] : ["open"],
                contact: i == 1 ? .object(["phone": .string("+33 1")]) : nil)
        }
    }

    func enrichment(limit: Int, pois: [POI]) async throws -> EnrichmentResult {
        let store = MemoryFixStore()
        try await store.insert([
            LocationFix(deviceId: "d1", coordinate: user, fixTime: Double(Self.now) - 30, receivedAt: Double(Self.now))
        ])
        let enricher = Enricher(
            settings: EnrichmentSettings(placesQuery: PlacesQuery(limit: limit)), fixes: store,
            places: LocalPlacesProvider(index: PlacesIndex(pois: pois)), map: nil, template: try BodyTemplate(),
            clock: FixedWallClock(epochSeconds: Double(Self.now)))
        let payload = try NotificationPayload(
            data: Data(
                #"{"aps":{"alert":{"title":"T","body":"B"},"mutable-content":1,"category":"location","timestamp":\#(Self.now)}}"#
                    .utf8))
        return try await enricher.enrich(deviceId: "d1", payload: payload)
    }

    @Test("the answer's POIs are the nearest POIs with their own fields, written from the packed records")
    func answerFromRecords() async throws {
        let pois = awkwardPOIs()
        let result = try await enrichment(limit: 6, pois: pois)
        #expect(result.outcome == .enriched)
        let truth = bruteForce(pois, from: user, query: PlacesQuery(limit: 6))
        #expect(truth.count == 6)
        // Every match came from the arena, not from a decoded POI.
        for used in result.pois {
            guard case .packed = used.match.source else {
                Issue.record("match \(used.storeId) was decoded before the answer")
                continue
            }
        }
        let answer = try JSONParser.parse(result.encodedJSON())
        guard case .array(let written)? = answer["pois"] else {
            Issue.record("no pois array")
            return
        }
        #expect(written.count == truth.count)
        for (object, expected) in zip(written, truth) {
            let poi = expected.poi
            #expect(object["store_id"] == .string(poi.storeId))
            #expect(object["name"] == .string(poi.name))
            #expect(object["latitude"]?.lenientDouble == poi.coordinate.latitude)
            #expect(object["longitude"]?.lenientDouble == poi.coordinate.longitude)
            #expect(object["distance"]?.lenientDouble == expected.distance)
            #expect(object["city"] == poi.address.city.map(JSONValue.string))
            #expect(object["zipcode"] == poi.address.zipcode.map(JSONValue.string))
            #expect(object["country_code"] == poi.address.countryCode.map(JSONValue.string))
            #expect(object["types"] == .array(poi.types.map(JSONValue.string)))
            #expect(object["tags"] == .array(poi.tags.map(JSONValue.string)))
            #expect(object["address"] == nil && object["contact"] == nil)
            #expect(
                object.objectValue?.count == 5
                    + [poi.address.city, poi.address.zipcode, poi.address.countryCode]
                    .compactMap { $0 }.count + 2)
        }
        // The typed result reads the same fields from the records.
        #expect(result.pois.map(\.storeId) == truth.map(\.poi.storeId))
        #expect(result.pois.map(\.name) == truth.map(\.poi.name))
        #expect(result.pois.map(\.city) == truth.map(\.poi.address.city))
        #expect(result.pois.map(\.tags) == truth.map(\.poi.tags))
        #expect(result.pois.map(\.latitude) == truth.map(\.poi.coordinate.latitude))

        // The same answer with every POI decoded first is the same bytes.
        var decoded = result
        decoded.pois = result.pois.map { used in
            var copy = used
            copy.match = used.match.decoded
            return copy
        }
        for used in decoded.pois {
            guard case .poi = used.match.source else {
                Issue.record("not decoded")
                continue
            }
        }
        #expect(decoded.encodedJSON() == result.encodedJSON())
    }

    @Test("a stored row whose text is not UTF-8 is answered as valid JSON, repaired as a decoded POI is")
    func invalidStoredText() async throws {
        let name: [UInt8] = Array("Caf".utf8) + [0xC3, 0x28] + Array(" long enough for a word".utf8)
        let storeId: [UInt8] = [0x69, 0x64, 0xFF]
        let city: [UInt8] = [0xE2, 0x82]
        let tags = Array(#"["ok","b\#u{FF}d"]"#.utf8).map { $0 == 0xC3 ? 0xFF : $0 }
        var builder = PlacesIndex.Builder()
        storeId.withUnsafeBufferPointer { id in
            name.withUnsafeBufferPointer { name in
                city.withUnsafeBufferPointer { city in
                    tags.withUnsafeBufferPointer { tags in
                        builder.add(
                            raw: RawPOIRow(
                                latitude: user.latitude, longitude: user.longitude, storeId: id, name: name,
                                city: city, zipcode: nil, countryCode: nil, addressLines: nil, types: nil, tags: tags,
                                contact: nil, userProperties: nil))
                    }
                }
            }
        }
        let matches = PlacesIndex(builder).nearest(to: user, query: PlacesQuery(limit: 1))
        let used = EnrichmentResult.POIUsed(try #require(matches.first))
        var object = JSONObjectWriter()
        used.write(into: &object)
        let bytes = object.finished()
        let parsed = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        #expect(parsed?["store_id"] as? String == String(decoding: storeId, as: UTF8.self))
        #expect(parsed?["name"] as? String == String(decoding: name, as: UTF8.self))
        #expect(parsed?["city"] as? String == String(decoding: city, as: UTF8.self))
        #expect((parsed?["tags"] as? [String])?.count == 2)
        #expect(used.name == String(decoding: name, as: UTF8.self))
    }

    @Test("a packed match decodes to the indexed POI; its position and id are read alone; a set POI replaces it")
    func packedMatchReads() throws {
        let pois = awkwardPOIs()
        let index = PlacesIndex(pois: pois)
        let matches = index.nearest(to: user, query: PlacesQuery(limit: pois.count))
        let byId = Dictionary(uniqueKeysWithValues: pois.map { ($0.storeId, $0) })
        #expect(matches.count == pois.count)
        for match in matches {
            let original = try #require(byId[match.storeId])
            #expect(match.poi == original)
            #expect(match.coordinate == original.coordinate)
            #expect(match.decoded == match)
        }
        let withoutDetails = index.nearest(to: user, query: PlacesQuery(limit: pois.count).withoutDetails)
        #expect(withoutDetails.allSatisfy { $0.poi.contact == nil })
        #expect(withoutDetails.map(\.storeId) == matches.map(\.storeId))
        var renamed = matches[0]
        renamed.poi.name = "Renamed"
        #expect(renamed.poi.name == "Renamed")
        #expect(renamed.storeId == matches[0].storeId)
        #expect(renamed.poi.address == matches[0].poi.address)
    }
}
