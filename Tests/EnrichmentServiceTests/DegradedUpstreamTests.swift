import EnrichmentCore
import EnrichmentRuntime
import EnrichmentService
import Essentials
import Foundation
import Synchronization
import TestSupport
import Testing

@Suite("Service: Woosmap upstream, healthy and failing (real local HTTP server)")
struct DegradedUpstreamTests {
    static let now: Int64 = 1_800_000_000

    // Generous defaults: only the slow-upstream tests are about timing; a loaded CI machine must not fail the others.
    func enrichAgainst(
        _ mode: String, bodyMode: BodyMode, timeout: Double = 5, deadline: Double = 10,
        filter: PlaceFilter? = nil,
        baseURL: (@Sendable (String) -> String)? = nil
    ) async throws -> (ServiceClient.Reply, Duration, [String]) {
        let fake = FakePlacesAPI()
        return try await fake.run { base in
            try await withService(
                { configuration in
                    configuration.places = .woosmap
                    configuration.woosmapBaseURL = baseURL?(base) ?? "\(base)/\(mode)"
                    configuration.woosmapKey = "SECRET-KEY"
                    configuration.mode = bodyMode
                    configuration.upstreamTimeout = timeout
                    configuration.deadline = deadline
                    configuration.placesLimit = 2
                    configuration.placesQuery = filter
                }, clock: FixedWallClock(epochSeconds: Double(Self.now))
            ) { client in
                _ = try await client.post(
                    "/v1/devices/p/locations",
                    json: #"{"locations":[{"latitude":43.6,"longitude":3.88,"utc_timestamp":\#(Self.now - 5)}]}"#)
                let started = ContinuousClock.now
                let reply = try await client.post(
                    "/v1/enrich", json: enrichBody(device: "p", payload: locationPayload(timestamp: "\(Self.now)")))
                return (reply, ContinuousClock.now - started, fake.queries.withLock { $0 })
            }
        }
    }

    @Test("healthy upstream: nearest first, SDK body, request carries key, lat, lng, stores_by_page")
    func healthy() async throws {
        let (reply, _, queries) = try await enrichAgainst("ok", bodyMode: .woosmap)
        #expect(reply.json?["outcome"] == .string("enriched"))
        #expect(
            reply.json?["notification"]?["body"]
                == .string("City = Montpellier \nZipCode = 34000 \nDistance = 135.28682936"))
        guard case .array(let pois)? = reply.json?["pois"] else {
            Issue.record("no pois")
            return
        }
        #expect(pois.map { $0["store_id"] } == [.string("near"), .string("far")])
        #expect(queries.count == 1)
        let query = queries.first ?? ""
        #expect(query.contains("private_key=SECRET-KEY"))
        #expect(query.contains("lat=43.6"))
        #expect(query.contains("lng=3.88"))
        #expect(query.contains("stores_by_page=2"))
    }

    @Test("the configured places query travels upstream in Woosmap syntax")
    func queryUpstream() async throws {
        let filter = try PlaceFilter.parse(#"(type:"cafe" OR tag:"wifi") AND user.rating:>=4 AND NOT name:"A \"B\"""#)
        let (_, _, queries) = try await enrichAgainst("ok", bodyMode: .default, filter: filter)
        let sent = URLComponents(string: "http://x/?" + (queries.first ?? ""))?.queryItems?.first {
            $0.name == "query"
        }?.value
        #expect(sent == #"(type:"cafe" OR tag:"wifi") AND user.rating:>=4 AND NOT name:="A \"B\"""#)
        #expect(try sent.map(PlaceFilter.parse) == filter)
    }

    @Test("HTTP 500: woosmap body is Error Search API 500, delivered, outcome degraded")
    func status500Woosmap() async throws {
        let (reply, _, _) = try await enrichAgainst("500", bodyMode: .woosmap)
        #expect(reply.status == 200)
        #expect(reply.json?["outcome"] == .string("degraded"))
        #expect(reply.json?["notification"]?["body"] == .string("Error Search API 500"))
        #expect(reply.json?["degraded"]?["reason"] == .string("upstream_status"))
    }

    @Test("HTTP 403 in default mode: location-only body, reason says the status, no key leaked")
    func status403Default() async throws {
        let (reply, _, _) = try await enrichAgainst("403", bodyMode: .default)
        #expect(reply.json?["outcome"] == .string("degraded"))
        #expect(reply.json?["notification"]?["body"] == .string("You are near 43.60000, 3.88000"))
        #expect(reply.json?["degraded"]?["message"] == .string("places API answered HTTP 403"))
        #expect(!reply.text.contains("SECRET-KEY"))
    }

    @Test("garbage and non-GeoJSON bodies are degraded as invalid responses")
    func garbage() async throws {
        for mode in ["garbage", "notgeo"] {
            let (reply, _, _) = try await enrichAgainst(mode, bodyMode: .woosmap)
            #expect(reply.json?["outcome"] == .string("degraded"), "\(mode)")
            #expect(reply.json?["degraded"]?["reason"] == .string("upstream_invalid_response"), "\(mode)")
            #expect(reply.json?["notification"]?["body"] == .string("myLatitude = 43.600000 \nmyLongitude = 3.880000"))
        }
    }

    @Test("a slow upstream is cut at the upstream timeout, well before it answers")
    func slowTimeout() async throws {
        let (reply, elapsed, _) = try await enrichAgainst("slow", bodyMode: .default, timeout: 0.3, deadline: 5)
        #expect(reply.json?["outcome"] == .string("degraded"))
        #expect(reply.json?["degraded"]?["reason"] == .string("upstream_timeout"))
        #expect(elapsed < .seconds(5))
    }

    @Test("a slow upstream is cut at the total deadline when that comes first")
    func slowDeadline() async throws {
        let (reply, elapsed, _) = try await enrichAgainst("slow", bodyMode: .default, timeout: 8, deadline: 0.3)
        #expect(reply.json?["degraded"]?["reason"] == .string("upstream_timeout"))
        #expect(elapsed < .seconds(5))
    }

    @Test("connection refused is degraded as unreachable")
    func refused() async throws {
        // Port 1 on loopback: nothing listens there.
        let (reply, _, _) = try await enrichAgainst("ok", bodyMode: .default, baseURL: { _ in "http://127.0.0.1:1" })
        #expect(reply.json?["outcome"] == .string("degraded"))
        #expect(reply.json?["degraded"]?["reason"] == .string("upstream_unreachable"))
    }

    @Test("an empty result leaves the body unchanged with a one-marker map")
    func empty() async throws {
        let (reply, _, _) = try await enrichAgainst("empty", bodyMode: .woosmap)
        #expect(reply.json?["outcome"] == .string("no_poi"))
        #expect(reply.json?["notification"]?["body"] == .string("Original"))
        #expect(reply.json?["static_map_url"]?.stringValue?.contains("zoom=15") == true)
    }
}
