import Foundation

/// The Woosmap SDK's exact body strings.
public enum WoosmapBody {
    public static let noTimestamp = "No timestamp"
    public static let outOfTime = "OUT OF TIME"

    /// `Error Search API <status>` for a non-200 places answer.
    public static func searchError(status: Int) -> String { "Error Search API \(status)" }

    /// The body for a found POI, per which upstreams are configured.
    public static func body(user: Coordinate, poi: PlaceMatch, mapConfigured: Bool) -> String {
        let address = poi.poi.address
        let city = address.city ?? ""
        let zipcode = address.zipcode ?? ""
        let placeLines = "City = \(city) \nZipCode = \(zipcode) \nDistance = \(poi.distance)"
        return mapConfigured ? placeLines : location(user) + " \n" + placeLines
    }

    /// The location-only body (`map only` and `neither` modes).
    public static func location(_ user: Coordinate) -> String {
        "myLatitude = \(CFormat.fixed(user.latitude)) \nmyLongitude = \(CFormat.fixed(user.longitude))"
    }
}
