import AsyncHTTPClient
import EnrichmentCore
import EnrichmentUpstream
import Essentials
import Foundation
import Synchronization
import TestSupport
import Testing

/// The Woosmap provider on its own, against a real local HTTP server playing the Search API.
@Suite("WoosmapPlacesProvider against a local Woosmap-compatible server")
struct WoosmapPlacesProviderTests {
    static let point = Coordinate(latitude: 43.6047, longitude: 3.8807)

    func provider(_ base: String, key: Secret? = "woos-SECRET", timeout: Duration = .seconds(2))
        -> WoosmapPlacesProvider
    {
        WoosmapPlacesProvider(client: HTTPClient.shared, baseURL: base, apiKey: key, timeout: timeout)
    }

    @Test("answers nearest first with the upstream's distances, and the request carries key, point, limit, query")
    func healthy() async throws {
        let api = FakePlacesAPI()
        try await api.run { (base: String) async throws -> Void in
            let filter = try PlaceFilter.parse(#"type:"cafe""#)
            let matches = try await provider(base + "/ok").nearest(
                to: Self.point, query: PlacesQuery(limit: 2, radius: 1000, filter: filter))
            #expect(matches.map(\.poi.storeId) == ["near", "far"])
            #expect(matches.map(\.distance) == [135.28682936, 900.5])
            let query = try #require(api.queries.withLock { $0.first })
            #expect(query.contains("private_key=woos-SECRET"))
            #expect(query.contains("lat=43.6047") && query.contains("lng=3.8807"))
            #expect(query.contains("stores_by_page=2") && query.contains("radius=1000"))
            #expect(query.contains("query=type"))
        }
    }

    /// The error a search against `mode` ends with, or nil when it succeeds.
    func failure(_ base: String, _ mode: String, timeout: Duration = .seconds(2)) async -> PlacesError? {
        do throws(PlacesError) {
            _ = try await provider(base + "/" + mode, timeout: timeout).nearest(to: Self.point, query: PlacesQuery())
            return nil
        } catch {
            return error
        }
    }

    @Test("failures are typed, and no error text carries the key")
    func failures() async throws {
        try await FakePlacesAPI().run { (base: String) async throws -> Void in
            #expect(await failure(base, "500") == .httpStatus(500))
            #expect(await failure(base, "403") == .httpStatus(403))
            for mode in ["garbage", "notgeo", "farther-than-earth", "negative"] {
                let error = await failure(base, mode)
                guard case .invalidResponse(let message)? = error else {
                    Issue.record("\(mode): expected an invalid response, got \(String(describing: error))")
                    continue
                }
                #expect(!message.contains("SECRET"))
            }
            let slow = await failure(base, "slow", timeout: .milliseconds(200))
            guard case .timeout? = slow else {
                Issue.record("expected a timeout, got \(String(describing: slow))")
                return
            }
            #expect(!(slow?.description.contains("SECRET") ?? true))
        }
    }

    @Test("an empty collection is no places, not an error")
    func empty() async throws {
        try await FakePlacesAPI().run { (base: String) async throws -> Void in
            #expect(try await provider(base + "/empty").nearest(to: Self.point, query: PlacesQuery()).isEmpty)
        }
    }
}
