import EnrichmentCore
import Foundation
import Testing

@Suite("POI CSV import")
struct POICSVTests {
    @Test("header-driven columns, quoting, lists, and per-row rejections")
    func parse() throws {
        let csv = """
        store_id,name,lat,lng,city,zipcode,country_code,address,types,tags
        s1,"Café ""Le Zinc"", Paris",48.85,2.35,Paris,75001,FR,"1 rue A|Bât B",cafe;bar,open
        s2,No coords,,2.35,Paris,,,,,
        s3,"Multi
        line",48.86,2.36,Paris,,,,shop,
        s4,Bad,95,0,,,,,,
        """
        let (pois, rejected) = try POICSV.parse(Data(csv.utf8))
        #expect(pois.map(\.storeId) == ["s1", "s3"])
        #expect(pois[0].name == "Café \"Le Zinc\", Paris")
        #expect(pois[0].address.lines == ["1 rue A", "Bât B"])
        #expect(pois[0].types == ["cafe", "bar"])
        #expect(pois[0].tags == ["open"])
        #expect(pois[1].name == "Multi\nline")
        #expect(rejected.map(\.index) == [3, 6])
        #expect(rejected[0].reason == "lat and lng must be decimal numbers")
    }

    @Test("a header without lat is refused with the required columns")
    func missingColumn() {
        #expect(throws: POIImportError.csv(line: 1, reason: "header has no lat column; required columns are store_id, lat, lng")) {
            try POICSV.parse(Data("store_id,lng\n1,2\n".utf8))
        }
    }
}
