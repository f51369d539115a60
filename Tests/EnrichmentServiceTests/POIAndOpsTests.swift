import EnrichmentCore
import EnrichmentRuntime
import EnrichmentService
import Essentials
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@Suite("Service: POI import, store search, auth, health and metrics")
struct POIAndOpsTests {
    @Test("GeoJSON import upserts by store id and /stores/search/ answers in the Woosmap shape")
    func geojsonImport() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            let collection = #"""
                {"type":"FeatureCollection","features":[
                  {"type":"Feature","properties":{"store_id":"a","name":"Alpha","address":{"lines":[],"city":"X","zipcode":"1"},"types":["cafe"],"tags":[]},"geometry":{"type":"Point","coordinates":[2.0,48.0]}},
                  {"type":"Feature","properties":{"store_id":"b","name":"Beta","types":["bank"]},"geometry":{"type":"Point","coordinates":[2.1,48.1]}},
                  {"type":"Feature","properties":{"name":"no id"},"geometry":{"type":"Point","coordinates":[2.1,48.1]}}
                ]}
                """#
            let imported = try await client.post("/v1/pois", json: collection)
            #expect(imported.status == 200)
            #expect(imported.json?["upserted"] == .int(2))
            #expect(imported.json?["total"] == .int(2))
            #expect(
                imported.json?["rejected"]
                    == .array([
                        .object(["index": .int(2), "reason": .string("properties.store_id must be a non-empty string")])
                    ]))

            let search = try await client.get("/stores/search/?lat=48.1&lng=2.1&stores_by_page=2")
            #expect(search.status == 200)
            #expect(search.json?["type"] == .string("FeatureCollection"))
            guard case .array(let features)? = search.json?["features"] else {
                Issue.record("no features")
                return
            }
            #expect(features.map { $0["properties"]?["store_id"] } == [.string("b"), .string("a")])
            #expect(features.first?["properties"]?["distance"] == .int(0))
            #expect(
                features.last?["geometry"]?["coordinates"] == .array([.double(2.0), .double(48.0)])
                    || features.last?["geometry"]?["coordinates"] == .array([.int(2), .int(48)]))

            // Moving "a" next to the query point makes it the nearest.
            _ = try await client.post(
                "/v1/pois",
                json:
                    #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"store_id":"a","name":"Alpha 2"},"geometry":{"type":"Point","coordinates":[2.1,48.1]}}]}"#
            )
            let filtered = try await client.get("/stores/search/?lat=48.1&lng=2.1&stores_by_page=5&types=bank")
            guard case .array(let banks)? = filtered.json?["features"] else {
                Issue.record("no features")
                return
            }
            #expect(banks.map { $0["properties"]?["store_id"] } == [.string("b")])
        }
    }

    @Test("CSV import over HTTP")
    func csvImport() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            let csv = "store_id,name,lat,lng,city\nc1,Corner,10.0,20.0,Town\nc2,Bad,,20,Town\n"
            let reply = try await client.request(.POST, "/v1/pois", body: Data(csv.utf8), contentType: "text/csv")
            #expect(reply.json?["upserted"] == .int(1))
            #expect(
                reply.json?["rejected"] == .array([.object(["index": .int(3), "reason": .string("lat is empty")])]))
            #expect(reply.json?["rejected_count"] == .int(1))
            #expect(reply.json?["rejected_by_reason"] == .object(["lat is empty": .int(1)]))
            let search = try await client.get("/stores/search/?lat=10&lng=20&radius=10")
            guard case .array(let features)? = search.json?["features"] else {
                Issue.record("no features")
                return
            }
            #expect(features.count == 1)
            let wrongType = try await client.request(.POST, "/v1/pois", body: Data(csv.utf8), contentType: "text/plain")
            #expect(wrongType.status == 415)
        }
    }

    @Test("search parameters are validated")
    func searchValidation() async throws {
        try await withService { client async throws in
            #expect(
                try await client.get("/stores/search/?lng=2").json?["error"]?["message"]
                    == .string("query parameters lat and lng are required (decimal degrees)"))
            #expect(try await client.get("/stores/search/?lat=1&lng=2&stores_by_page=300").status == 200)
            #expect(try await client.get("/stores/search/?lat=1&lng=2&stores_by_page=301").status == 400)
            #expect(try await client.get("/stores/search/?lat=1&lng=2&stores_by_page=300&page=10").status == 200)
            let tooDeep = try await client.get("/stores/search/?lat=1&lng=2&stores_by_page=300&page=11")
            #expect(tooDeep.status == 400)
            #expect(tooDeep.json?["error"]?["message"]?.stringValue?.contains("deepest reachable") == true)
            #expect(try await client.get("/stores/search/?lat=1&lng=2&radius=-5").status == 400)
            #expect(try await client.get("/stores/search/?lat=95&lng=2").status == 400)
            #expect(try await client.get("/stores/search/?lat=1&lng=2&stores_by_page=0").status == 400)
        }
    }

    static func encoded(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }

    /// Eight stores around (0, 0) with types, tags, a city and user properties.
    static let shop = #"""
        {"type":"FeatureCollection","features":[
          {"type":"Feature","properties":{"store_id":"s1","name":"One","address":{"city":"Paris"},"types":["cafe"],"tags":["wifi"],"user_properties":{"rating":5}},"geometry":{"type":"Point","coordinates":[0.001,0]}},
          {"type":"Feature","properties":{"store_id":"s2","name":"Two","address":{"city":"Paris"},"types":["bank"],"tags":[],"user_properties":{"rating":2}},"geometry":{"type":"Point","coordinates":[0.002,0]}},
          {"type":"Feature","properties":{"store_id":"s3","name":"Three","address":{"city":"Lyon"},"types":["cafe"],"tags":[],"user_properties":{"rating":4}},"geometry":{"type":"Point","coordinates":[0.003,0]}},
          {"type":"Feature","properties":{"store_id":"s4","name":"Four","address":{"city":"Lyon"},"types":["cafe"],"tags":["wifi"],"user_properties":{"rating":3}},"geometry":{"type":"Point","coordinates":[0.004,0]}},
          {"type":"Feature","properties":{"store_id":"s5","name":"Five","types":["shop"],"tags":["wifi"]},"geometry":{"type":"Point","coordinates":[0.005,0]}},
          {"type":"Feature","properties":{"store_id":"s6","name":"Six","types":["shop"]},"geometry":{"type":"Point","coordinates":[0.006,0]}},
          {"type":"Feature","properties":{"store_id":"s7","name":"Seven","types":["cafe"]},"geometry":{"type":"Point","coordinates":[0.007,0]}},
          {"type":"Feature","properties":{"store_id":"s8","name":"Eight","types":["cafe"]},"geometry":{"type":"Point","coordinates":[5,5]}}
        ]}
        """#

    @Test("/stores/search/ applies the Woosmap query, radius and paging")
    func searchQuery() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            _ = try await client.post("/v1/pois", json: Self.shop)
            func ids(_ parameters: String) async throws -> [String] {
                let reply = try await client.get("/stores/search/?lat=0&lng=0&" + parameters)
                guard case .array(let features)? = reply.json?["features"] else {
                    Issue.record("no features: \(reply.json as Any)")
                    return []
                }
                return features.compactMap { $0["properties"]?["store_id"]?.stringValue }
            }
            #expect(try await ids("query=" + Self.encoded(#"type:"cafe" AND tag:"wifi""#)) == ["s1", "s4"])
            #expect(try await ids("query=" + Self.encoded(#"city:="Lyon" OR user.rating:>=5"#)) == ["s1", "s3", "s4"])
            #expect(try await ids("query=" + Self.encoded(#"NOT type:"cafe""#) + "&stores_by_page=2") == ["s2", "s5"])
            #expect(try await ids("query=" + Self.encoded(#"type:"cafe""#) + "&radius=700") == ["s1", "s3", "s4"])
            #expect(try await ids("query=" + Self.encoded("user.rating:<3")) == ["s2"])
            // Form encoding, as the Woosmap JS SDK and curl --data-urlencode send it: '+' is a space.
            #expect(try await ids(#"query=type%3A%22cafe%22+AND+tag%3A%22wifi%22"#) == ["s1", "s4"])
            #expect(try await client.get("/stores/search/?lat=0&lng=0&query=%ZZ").status == 400)
            let page2 = try await client.get("/stores/search/?lat=0&lng=0&stores_by_page=3&page=2")
            guard case .array(let features)? = page2.json?["features"] else {
                Issue.record("no features")
                return
            }
            #expect(features.compactMap { $0["properties"]?["store_id"]?.stringValue } == ["s4", "s5", "s6"])
            #expect(page2.json?["pagination"] == .object(["page": .int(2), "pageCount": .int(3)]))
            let within = try await client.get("/stores/search/?lat=0&lng=0&stores_by_page=2&radius=500")
            #expect(
                within.json?["pagination"] == .object(["page": .int(1), "pageCount": .int(2)]), "4 stores within 500 m")
        }
    }

    @Test("a malformed query is a 400 naming the parameter and the position")
    func searchQueryErrors() async throws {
        try await withService { client async throws in
            let reply = try await client.get(
                "/stores/search/?lat=0&lng=0&query=" + Self.encoded(#"type:"cafe" tag:"x""#))
            #expect(reply.status == 400)
            #expect(reply.errorReason == "invalid_query")
            #expect(reply.json?["error"]?["parameter"] == .string("query"))
            #expect(reply.json?["error"]?["position"] == .int(13))
            #expect(
                reply.json?["error"]?["message"] == .string("query: expected AND or OR between clauses at position 13"))
        }
    }

    @Test("CSV import over HTTP with the geonames column mapping")
    func csvImportMapped() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            let csv =
                "lat,lon,name,admin1,admin2,cc\n48.85341,2.3488,Paris,Ile-de-France,Paris,FR\n45.74846,4.84671,Lyon,Auvergne-Rhone-Alpes,Rhone,FR\n,1,Nowhere,,,FR\n"
            let unmapped = try await client.request(.POST, "/v1/pois", body: Data(csv.utf8), contentType: "text/csv")
            #expect(unmapped.status == 400)
            #expect(unmapped.json?["error"]?["message"]?.stringValue?.contains("--map geonames") == true)
            let reply = try await client.request(
                .POST, "/v1/pois?map=geonames", body: Data(csv.utf8), contentType: "text/csv")
            #expect(reply.status == 200)
            #expect(reply.json?["upserted"] == .int(2))
            #expect(reply.json?["rejected_by_reason"] == .object(["lat is empty": .int(1)]))
            let lyon = try await client.get(
                "/stores/search/?lat=45.7&lng=4.8&stores_by_page=1&query="
                    + Self.encoded(#"user.admin1:"Auvergne-Rhone-Alpes""#))
            guard case .array(let features)? = lyon.json?["features"], let first = features.first else {
                Issue.record("no features")
                return
            }
            #expect(first["properties"]?["store_id"] == .string("gn-2"))
            #expect(first["properties"]?["address"]?["city"] == .string("Lyon"))
            #expect(first["properties"]?["address"]?["country_code"] == .string("FR"))
            let badMap = try await client.request(
                .POST, "/v1/pois?map=" + Self.encoded("lat=lat"), body: Data(csv.utf8), contentType: "text/csv")
            #expect(badMap.status == 400)
            #expect(badMap.errorReason == "invalid_import")
            let geoWithMap = try await client.request(.POST, "/v1/pois?map=geonames", body: Data(Self.shop.utf8))
            #expect(geoWithMap.status == 400)
        }
    }

    @Test("with an API key: 401 without it, open health and metrics, query key for the SDK search")
    func auth() async throws {
        try await withService({ $0.apiKey = "s3cret" }) { client async throws in
            let denied = try await client.post("/v1/enrich", json: "{}")
            #expect(denied.status == 401)
            #expect(denied.errorReason == "unauthorized")
            #expect(denied.headers["www-authenticate"] == "Bearer")
            #expect(
                try await client.post("/v1/enrich", json: "{}", headers: ["Authorization": "Bearer wrong"]).status
                    == 401)
            #expect(
                try await client.post("/v1/enrich", json: "{}", headers: ["Authorization": "Bearer s3cret"]).status
                    == 400)
            #expect(try await client.get("/health").status == 200)
            #expect(try await client.get("/metrics").status == 200)
            #expect(try await client.get("/stores/search/?lat=1&lng=1&private_key=s3cret").status == 200)
            #expect(try await client.get("/stores/search/?lat=1&lng=1").status == 401)
        }
    }

    @Test("health reports the index, metrics count outcomes and requests")
    func healthAndMetrics() async throws {
        try await withService { client async throws in
            let health = try await client.get("/health")
            #expect(health.json?["status"] == .string("ok"))
            #expect(health.json?["pois"] == .int(Int64(try SamplePOIs.load().count)))
            _ = try await client.post(
                "/v1/enrich",
                json: enrichBody(
                    device: "nobody", payload: locationPayload(timestamp: "\(Int64(Date().timeIntervalSince1970))")))
            let metrics = try await client.get("/metrics").text
            #expect(metrics.contains(#"enrichment_outcomes_total{outcome="no_fix",provider="none",source="enrich"} 1"#))
            #expect(metrics.contains(#"http_requests_total{method="POST",route="/v1/enrich",status="200"} 1"#))
        }
    }

    @Test("unknown routes get the JSON error shape")
    func unknownRoute() async throws {
        try await withService { client async throws in
            let reply = try await client.get("/v2/whatever")
            #expect(reply.status == 404)
            #expect(reply.errorReason == "not_found")
        }
    }
}
