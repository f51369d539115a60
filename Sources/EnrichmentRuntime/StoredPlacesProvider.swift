import EnrichmentCore

/// The local places search over the POI store itself (SQLite R*Tree or PostgreSQL GiST), without the in-memory
/// index: a one-off enrichment answers in milliseconds instead of loading every POI first.
struct StoredPlacesProvider: PlacesProvider {
    let name = "local"
    let store: any POIStore
    var answersImmediately: Bool { true }

    func nearest(to point: Coordinate, query: PlacesQuery) async throws(PlacesError) -> [PlaceMatch] {
        do { return try await store.nearest(to: point, query: query) } catch {
            throw .transport("the POI store could not be searched: \(error)")
        }
    }
}
