import EnrichmentCore
import EnrichmentService
import Foundation
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
            #expect(imported.json?["rejected"] == .array([.object(["index": .int(2), "reason": .string("properties.store_id must be a non-empty string")])]))

            let search = try await client.get("/stores/search/?lat=48.1&lng=2.1&stores_by_page=2")
            #expect(search.status == 200)
            #expect(search.json?["type"] == .string("FeatureCollection"))
            guard case .array(let features)? = search.json?["features"] else { Issue.record("no features"); return }
            #expect(features.map { $0["properties"]?["store_id"] } == [.string("b"), .string("a")])
            #expect(features.first?["properties"]?["distance"] == .int(0))
            #expect(features.last?["geometry"]?["coordinates"] == .array([.double(2.0), .double(48.0)]) ||
                    features.last?["geometry"]?["coordinates"] == .array([.int(2), .int(48)]))

            // Moving "a" next to the query point makes it the nearest.
            _ = try await client.post("/v1/pois", json: #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"store_id":"a","name":"Alpha 2"},"geometry":{"type":"Point","coordinates":[2.1,48.1]}}]}"#)
            let filtered = try await client.get("/stores/search/?lat=48.1&lng=2.1&stores_by_page=5&types=bank")
            guard case .array(let banks)? = filtered.json?["features"] else { Issue.record("no features"); return }
            #expect(banks.map { $0["properties"]?["store_id"] } == [.string("b")])
        }
    }

    @Test("CSV import over HTTP")
    func csvImport() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            let csv = "store_id,name,lat,lng,city\nc1,Corner,10.0,20.0,Town\nc2,Bad,,20,Town\n"
            let reply = try await client.request(.POST, "/v1/pois", body: Data(csv.utf8), contentType: "text/csv")
            #expect(reply.json?["upserted"] == .int(1))
            #expect(reply.json?["rejected"] == .array([.object(["index": .int(3), "reason": .string("lat and lng must be decimal numbers")])]))
            let search = try await client.get("/stores/search/?lat=10&lng=20&radius=10")
            guard case .array(let features)? = search.json?["features"] else { Issue.record("no features"); return }
            #expect(features.count == 1)
            let wrongType = try await client.request(.POST, "/v1/pois", body: Data(csv.utf8), contentType: "text/plain")
            #expect(wrongType.status == 415)
        }
    }

    @Test("search parameters are validated")
    func searchValidation() async throws {
        try await withService { client async throws in
            #expect(try await client.get("/stores/search/?lng=2").json?["error"]?["message"] == .string("query parameter lat is required"))
            #expect(try await client.get("/stores/search/?lat=95&lng=2").status == 400)
            #expect(try await client.get("/stores/search/?lat=1&lng=2&stores_by_page=0").status == 400)
        }
    }

    @Test("with an API key: 401 without it, open health and metrics, query key for the SDK search")
    func auth() async throws {
        try await withService({ $0.apiKey = "s3cret" }) { client async throws in
            let denied = try await client.post("/v1/enrich", json: "{}")
            #expect(denied.status == 401)
            #expect(denied.errorReason == "unauthorized")
            #expect(denied.headers["www-authenticate"] == "Bearer")
            #expect(try await client.post("/v1/enrich", json: "{}", headers: ["Authorization": "Bearer wrong"]).status == 401)
            #expect(try await client.post("/v1/enrich", json: "{}", headers: ["Authorization": "Bearer s3cret"]).status == 400)
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
            _ = try await client.post("/v1/enrich", json: enrichBody(device: "nobody", payload: locationPayload(timestamp: "\(Int64(Date().timeIntervalSince1970))")))
            let metrics = try await client.get("/metrics").text
            #expect(metrics.contains(#"enrichment_outcomes_total{outcome="no_fix",provider="none"} 1"#))
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

@Suite("Configuration")
struct ConfigurationTests {
    @Test("environment values are validated with the setting name and what is allowed")
    func invalidValues() {
        var configuration = ServiceConfiguration()
        #expect(throws: ConfigurationError(setting: "ENRICH_PORT", value: "http", allowed: "an integer port 0-65535 (0 picks a free port)")) {
            try configuration.apply(environment: ["ENRICH_PORT": "http"])
        }
        #expect(throws: ConfigurationError.self) { try configuration.apply(environment: ["ENRICH_MODE": "fancy"]) }
        #expect(throws: ConfigurationError.self) { try configuration.apply(environment: ["ENRICH_DEADLINE": "-1"]) }
    }

    @Test("secrets never appear in errors or the start-up summary")
    func secretsRedacted() throws {
        var configuration = ServiceConfiguration()
        try configuration.apply(environment: ["ENRICH_MAP_KEY": "AIzaSECRET", "ENRICH_API_KEY": "tok-SECRET", "ENRICH_PORT": "9090"])
        #expect(configuration.port == 9090)
        #expect(configuration.mapKey == "AIzaSECRET")
        #expect(!configuration.redactedSummary.contains("SECRET"))
        #expect(configuration.redactedSummary.contains("map_key=set"))
        configuration.places = .woosmap
        configuration.woosmapBaseURL = "https://api.woosmap.com"
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }
}
