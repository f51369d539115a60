public import EnrichmentCore
import Essentials
import Foundation

/// The small POI set bundled with the service so it is useful with no configuration.
public enum SamplePOIs {
    /// Loads the bundled GeoJSON.
    public static func load() throws -> [POI] {
        guard let url = Bundle.module.url(forResource: "sample-pois", withExtension: "geojson") else {
            throw CocoaError(.fileNoSuchFile)
        }
        return try WoosmapFormat.parseFeatureCollection(JSONValue.decode(Data(contentsOf: url))).pois
    }
}
