import ArgumentParser
import EnrichmentCore
import EnrichmentService
import EnrichmentStorage
import Foundation

/// `enrichment-server import-pois FILE`: load a large CSV or GeoJSON file straight into the SQLite database.
struct ImportPOIs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-pois",
        abstract: "Upsert POIs from a CSV or GeoJSON file into the SQLite database (by store id).",
        discussion: """
            CSV needs a header with store_id, lat and lng; optional: name, city, zipcode, country_code, address \
            (lines separated by |), types and tags (separated by ;). Files ending in .json or .geojson are read as a \
            GeoJSON FeatureCollection in the Woosmap store shape. A running server sees the new POIs after a restart; \
            to update a running server without restarting, POST the file to /v1/pois instead.
            """)

    @Argument(help: "The CSV or GeoJSON file to import.") var file: String
    @Option(help: "SQLite file (ENRICH_DB, default data/enrichment.sqlite).") var db: String?
    @Flag(help: "Print the result as JSON.") var json = false

    func run() async throws {
        let path = db ?? ProcessInfo.processInfo.environment["ENRICH_DB"] ?? "data/enrichment.sqlite"
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ValidationError("cannot read '\(file)': check the path and permissions")
        }
        let started = Date()
        let parsed: (pois: [POI], rejected: [WoosmapFormat.FeatureProblem])
        do {
            if file.hasSuffix(".json") || file.hasSuffix(".geojson") {
                let collection = try WoosmapFormat.parseFeatureCollection(try JSONValue.decode(data))
                parsed = (collection.pois, collection.rejected)
            } else {
                parsed = try POICSV.parse(data)
            }
        } catch let error as POIImportError {
            throw ValidationError("\(file): \(error.description)")
        }
        let database = try SQLiteDatabase(path: path)
        let store = SQLitePOIStore(database: database)
        try await POIImporter(store: store, index: PlacesIndex()).importPOIs(parsed.pois)
        let total = try await store.count()
        let seconds = Date().timeIntervalSince(started)
        if json {
            print("{\"upserted\": \(parsed.pois.count), \"rejected\": \(parsed.rejected.count), \"total\": \(total)}")
        } else {
            print("Imported \(parsed.pois.count) POIs into \(path) in \(String(format: "%.1f", seconds)) s; \(total) stored.")
            for problem in parsed.rejected.prefix(20) { print("  skipped line \(problem.index): \(problem.reason)") }
            if parsed.rejected.count > 20 { print("  ... and \(parsed.rejected.count - 20) more skipped rows") }
        }
    }
}
