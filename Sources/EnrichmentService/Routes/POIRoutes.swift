import EnrichmentCore
import Foundation
import Hummingbird

/// POI import (`POST /v1/pois`) and the Woosmap-compatible search (`GET /stores/search/`).
struct POIRoutes {
    let state: ServiceState

    struct ImportResult: Encodable {
        var upserted: Int
        var rejected: [WoosmapFormat.FeatureProblem]
        var total: Int
    }

    func register(on router: Router<ServiceContext>) {
        router.post("/v1/pois") { request, _ in
            let contentType = request.headers[.contentType]?.lowercased() ?? "application/json"
            let data = try await JSONIO.readBody(request, limit: state.configuration.maxImportBytes)
            let parsed: (pois: [POI], rejected: [WoosmapFormat.FeatureProblem])
            if contentType.hasPrefix("text/csv") {
                parsed = try POICSV.parse(data)
            } else if contentType.hasPrefix("application/json") || contentType.hasPrefix("application/geo+json") {
                let document: JSONValue
                do throws(JSONParseError) { document = try JSONValue.decode(data) } catch {
                    throw APIError.invalid("invalid_json", "request body is not valid JSON: \(error.description)")
                }
                let collection = try WoosmapFormat.parseFeatureCollection(document)
                parsed = (collection.pois, collection.rejected)
            } else {
                throw APIError(.unsupportedMediaType, reason: "unsupported_media_type",
                               message: "send GeoJSON as application/json (or application/geo+json), or CSV as text/csv")
            }
            try await POIImporter(store: state.pois, index: state.index).importPOIs(parsed.pois)
            return try JSONIO.response(ImportResult(upserted: parsed.pois.count, rejected: parsed.rejected, total: state.index.count))
        }

        router.get("/stores/search") { request, _ in
            let query = request.uri.queryParameters
            func number(_ name: String, required: Bool) throws -> Double? {
                guard let raw = query[name[...]] else {
                    if required { throw APIError.invalid("invalid_query", "query parameter \(name) is required") }
                    return nil
                }
                guard let value = Double(String(raw)), value.isFinite else {
                    throw APIError.invalid("invalid_query", "query parameter \(name)='\(raw)' must be a decimal number")
                }
                return value
            }
            let point = Coordinate(latitude: try number("lat", required: true)!, longitude: try number("lng", required: true)!)
            guard point.isValid else {
                throw APIError.invalid("invalid_query", "lat must be in [-90, 90] and lng in [-180, 180]")
            }
            let limit = try number("stores_by_page", required: false).map(Int.init) ?? 10
            guard (1...300).contains(limit) else {
                throw APIError.invalid("invalid_query", "stores_by_page must be an integer from 1 to 300")
            }
            let radius = try number("radius", required: false)
            if let radius, radius <= 0 { throw APIError.invalid("invalid_query", "radius must be > 0 metres") }
            func list(_ name: String) -> [String] {
                query[name[...]].map { $0.split(separator: ",").map(String.init) } ?? []
            }
            let matches = state.index.nearest(
                to: point, query: PlacesQuery(limit: limit, radius: radius, types: list("types"), tags: list("tags")))
            return JSONIO.response(json: WoosmapFormat.searchResponse(matches))
        }
    }
}

/// Writes POIs to the store (source of truth) and then to the in-memory index.
public struct POIImporter: Sendable {
    let store: any POIStore
    let index: PlacesIndex

    public init(store: any POIStore, index: PlacesIndex) {
        self.store = store
        self.index = index
    }

    /// Upserts in chunks so one huge import does not hold the write lock for long.
    public func importPOIs(_ pois: [POI], chunkSize: Int = 5_000) async throws {
        var start = 0
        while start < pois.count {
            let end = min(start + chunkSize, pois.count)
            _ = try await store.upsert(Array(pois[start..<end]))
            start = end
        }
        index.upsert(pois)
    }
}
