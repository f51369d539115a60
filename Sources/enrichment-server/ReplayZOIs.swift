import ArgumentParser
import EnrichmentRuntime
import Essentials
import Foundation
import LocationCore

/// `enrichment-server zois --visits FILE`: replays a visit file offline as one fresh device and prints its ZOIs.
struct ReplayZOIs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zois",
        abstract: "Replay a visit file through the SDK's zone-of-interest pipeline and print the zones.",
        discussion: """
            The file is replayed as one fresh device, with no database and no server. Formats:
              sdk-csv  the Woosmap SDK's sample CSV (id,accuracy,POINT(lng lat),arrival,departure,…), read as the \
            SDK's sample importer reads it: rows with accuracy below 20 m, in file order.
              json     the body of POST /v1/devices/{id}/visits ({"visits": [...]}), with that endpoint's rules.
            The default format follows the file name (.csv: sdk-csv, otherwise json). ENRICH_ZOI_CLASSIFICATION \
            and ENRICH_VISIT_ACCURACY_FILTER apply as they do in the service. With --json, stdout carries the JSON \
            of GET /v1/devices/{id}/zois and nothing else.

            Example:
              enrichment-server zois --visits Tests/Fixtures/location/Visit_qualif.csv --json
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case sdkCSV = "sdk-csv"
        case json
    }

    @Option(help: "The visit file to replay.") var visits: String
    @Option(help: "sdk-csv or json (default: by the file's extension).") var format: Format?
    @Flag(help: "Print {\"zois\": [...]} as JSON (the same document as GET /v1/devices/{id}/zois).") var json = false

    func run() async throws {
        let configuration: ServiceConfiguration
        do { configuration = try .resolve(environment: ProcessInfo.processInfo.environment, options: [:]) } catch {
            throw ValidationError(error.description)
        }
        guard let data = FileManager.default.contents(atPath: visits) else {
            throw ValidationError("cannot read '\(visits)': check the path and permissions")
        }
        let format = self.format ?? (visits.lowercased().hasSuffix(".csv") ? .sdkCSV : .json)
        let intake = VisitIntake(settings: configuration.location)
        let zois: [ZoneOfInterest]
        var rejected: [VisitIntake.Rejection] = []
        switch format {
        case .sdkCSV:
            do {
                zois = intake.replaySample(
                    try VisitFile.sampleCSV(String(decoding: data, as: UTF8.self), deviceId: "replay"))
            } catch {
                throw ValidationError("\(visits): \(error.description)")
            }
        case .json:
            let document: JSONValue
            do { document = try JSONValue.decode(data) } catch {
                throw ValidationError("\(visits): not valid JSON: \(error.description)")
            }
            let items: [Result<VisitIntake.Item, VisitIntake.Rejection>]
            do { items = try VisitIntake.parse(document) } catch {
                throw ValidationError("\(visits): \(error.description)")
            }
            let (change, outcome) = intake.run(
                items, deviceId: "replay", state: DeviceVisits(), now: Date().timeIntervalSince1970)
            zois = change.zois
            rejected = outcome.rejected
        }
        if json {
            print(String(decoding: ZOIList(zois).jsonBytes, as: UTF8.self))
            for r in rejected {
                FileHandle.standardError.write(Data("visits[\(r.index)] refused: \(r.message)\n".utf8))
            }
            return
        }
        for r in rejected { print("visits[\(r.index)] refused (\(r.reason)): \(r.message)") }
        print("\(zois.count) zones of interest")
        for zoi in zois {
            let centre = String(format: "%.6f, %.6f", zoi.latitude, zoi.longitude)
            print(
                "  \(zoi.id)  \(zoi.period ?? "-")  centre \(centre)  visits \(zoi.visitIds.count)  \(zoi.duration) s")
        }
    }
}
