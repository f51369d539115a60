import EnrichmentCore
import Hummingbird

/// The query string of `GET /stores/search/`, read and checked as the Woosmap Search API reads it.
///
/// `lat`, `lng` (required), `radius` (metres), `stores_by_page` (1-300, default 10), `page` (from 1; at most
/// `maximumReach` results deep), `query` (Woosmap syntax), and the shorthands `types`/`tags` (comma-separated,
/// any of them).
struct StoreSearchRequest {
    /// Deepest result reachable by paging (`page` x `stores_by_page`).
    static let maximumReach = 3_000
    static let maximumPerPage = 300
    static let defaultPerPage = 10

    var point: Coordinate
    var query: PlacesQuery
    var page: Int

    init(_ request: Request) throws {
        let parameters = try request.formQuery()
        func text(_ name: String) -> String? { parameters[name] }
        func number(_ name: String) throws -> Double? {
            guard let raw = text(name) else { return nil }
            guard let value = Double(raw), value.isFinite else {
                throw APIError.invalid(.invalidQuery, "query parameter \(name)='\(raw)' must be a decimal number")
            }
            return value
        }
        func integer(_ name: String, _ range: ClosedRange<Int>, default fallback: Int) throws -> Int {
            guard let raw = text(name) else { return fallback }
            guard let value = Int(raw), range.contains(value) else {
                throw APIError.invalid(
                    .invalidQuery,
                    "query parameter \(name)='\(raw)' must be an integer from \(range.lowerBound) to \(range.upperBound)"
                )
            }
            return value
        }
        guard let lat = try number("lat"), let lng = try number("lng") else {
            throw APIError.invalid(.invalidQuery, "query parameters lat and lng are required (decimal degrees)")
        }
        point = Coordinate(latitude: lat, longitude: lng)
        guard point.isValid else {
            throw APIError.invalid(.invalidQuery, "lat must be in [-90, 90] and lng in [-180, 180]")
        }
        let perPage = try integer("stores_by_page", 1...Self.maximumPerPage, default: Self.defaultPerPage)
        page = try integer("page", 1...Self.maximumReach, default: 1)
        guard page * perPage <= Self.maximumReach else {
            throw APIError.invalid(
                .invalidQuery,
                "page \(page) x stores_by_page \(perPage) goes past result \(Self.maximumReach), the deepest reachable; narrow the search with radius or query"
            )
        }
        let radius = try number("radius")
        if let radius, radius <= 0 { throw APIError.invalid(.invalidQuery, "radius must be > 0 metres") }
        func list(_ name: String) -> [String] {
            text(name).map { $0.split(separator: ",").map(String.init) } ?? []
        }
        let parsed = try text("query").map { raw throws(PlaceFilterSyntaxError) in try PlaceFilter.parse(raw) }
        query = PlacesQuery(
            limit: perPage, radius: radius,
            filter: PlaceFilter.combining(types: list("types"), tags: list("tags"), query: parsed))
    }
}
