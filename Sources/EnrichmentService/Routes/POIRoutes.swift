import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

/// POI import (`POST /v1/pois`) and the Woosmap-compatible search (`GET /stores/search/`).
struct POIRoutes {
    let state: ServiceState

    static func storeId(_ context: ServiceContext) throws -> String {
        let raw = try context.parameters.require("storeId")
        guard let id = raw.removingPercentEncoding, !id.isEmpty else {
            throw APIError.invalid(
                .invalidStoreID, "store id '\(raw)' is not valid percent-encoding", field: "storeId")
        }
        return id
    }

    func register(on router: RouteRecorder) {
        let imports = AsyncGate()
        router.post("/v1/pois", permission: .admin) { request, _ in
            let started = ContinuousClock.now
            let format = try Self.format(of: request)
            // One import at a time: the body is read only when it is this request's turn, so concurrent uploads
            // wait on the network instead of each holding its file and POIs in memory.
            let report = try await imports.run {
                // The body is dropped as soon as it is parsed: only the POIs go on to the store and the index.
                let batch = try POIBatch.read(
                    try await JSONIO.readBody(request, limit: state.configuration.maxImportBytes),
                    format: format)
                try await state.importer.importPOIs(batch.pois)
                let seconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1e6
                return batch.report(total: state.index.count, seconds: seconds, format: format)
            }
            return JSONIO.response(report)
        }

        router.get("/v1/pois/:storeId", permission: .readOrSend) { _, context in
            let id = try Self.storeId(context)
            guard let poi = try await state.pois.poi(storeId: id) else {
                throw APIError(.notFound, reason: .unknownPOI, message: "no POI with store id '\(id)'")
            }
            return JSONIO.response(bytes: WoosmapFormat.feature(poi))
        }
        router.delete("/v1/pois/:storeId", permission: .admin) { _, context in
            let id = try Self.storeId(context)
            guard try await state.importer.deletePOIs(storeIds: [id]) > 0 else {
                throw APIError(.notFound, reason: .unknownPOI, message: "no POI with store id '\(id)'")
            }
            return JSONIO.response(
                bytes: JSONWriter.bytes(.object(["deleted": .bool(true), "store_id": .string(id)])))
        }

        router.get("/stores/search", permission: .readOrSend) { request, _ in
            let search = try StoreSearchRequest(request)
            let result = state.index.search(
                near: search.point, query: search.query, page: search.page,
                reach: StoreSearchRequest.maximumReach)
            return JSONIO.response(
                WoosmapFormat.SearchResponse(result.matches, page: search.page, pageCount: result.pageCount))
        }
    }
}

extension POIRoutes {
    /// The import format from `Content-Type`, with the CSV column mapping from `?map=` and `?id_prefix=`.
    static func format(of request: Request) throws -> POIBatch.Format {
        let contentType = request.headers[.contentType]?.lowercased() ?? "application/json"
        let parameters = try request.formQuery()
        let map = parameters["map"]
        let prefix = parameters["id_prefix"]
        if contentType.hasPrefix("text/csv") {
            guard let map else { return .csv(prefix.map { POIColumnMapping.headerNames(idPrefix: $0) }) }
            return .csv(try POIColumnMapping.parse(map, idPrefix: prefix))
        }
        guard contentType.hasPrefix("application/json") || contentType.hasPrefix("application/geo+json") else {
            throw APIError(
                .unsupportedMediaType, reason: .unsupportedMediaType,
                message: "send GeoJSON as application/json (or application/geo+json), or CSV as text/csv")
        }
        guard map == nil, prefix == nil else {
            throw APIError.invalid(
                .invalidQuery, "map and id_prefix apply to CSV imports (Content-Type: text/csv) only")
        }
        return .geoJSON
    }
}
