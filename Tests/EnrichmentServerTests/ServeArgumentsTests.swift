import ArgumentParser
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Testing

@testable import enrichment_server

/// `enrichment-server` argument handling in-process: the settings table behind `serve` and `import-pois`.
@Suite("enrichment-server arguments (parseAsRoot)")
struct ServeArgumentsTests {
    func message(_ arguments: [String]) -> String? {
        do {
            _ = try EnrichmentServerCommand.parseAsRoot(arguments)
            return nil
        } catch {
            return EnrichmentServerCommand.message(for: error)
        }
    }

    @Test("serve takes every setting as a flag (both spellings), flags over variables")
    func serveFlags() throws {
        let command = try #require(
            try EnrichmentServerCommand.parseAsRoot(["serve", "--port", "0", "--mode=woosmap", "--db", "x.sqlite"])
                as? Serve)
        let configuration = try Serve.configuration(
            arguments: command.settings, environment: ["ENRICH_PORT": "9000", "ENRICH_STALENESS_WINDOW": "10"])
        #expect(configuration.port == 0)
        #expect(configuration.mode == .woosmap)
        #expect(configuration.databasePath == "x.sqlite")
        #expect(configuration.stalenessWindow == 10)
        // With no subcommand, serve is the default.
        #expect(try EnrichmentServerCommand.parseAsRoot(["--port", "0"]) is Serve)
    }

    @Test("a bad flag is reported under the flag the user typed, not its variable")
    func errorsNameTheFlag() {
        #expect(message(["serve", "--port", "abc"])?.contains("--port 'abc' is not valid") == true)
        #expect(message(["serve", "--port", "abc"])?.contains("ENRICH_PORT") == false)
        #expect(message(["serve", "--places", "everywhere"])?.contains("local, woosmap or none") == true)
        #expect(message(["serve", "--api-key", "x"])?.contains("environment") == true)
        #expect(message(["serve", "--no-such-flag", "1"])?.contains("unknown option") == true)
    }

    @Test("import-pois takes --db through the same table, over ENRICH_DB")
    func importDatabase() throws {
        let command = try #require(
            try EnrichmentServerCommand.parseAsRoot(["import-pois", "f.csv", "--db", "y.sqlite"]) as? ImportPOIs)
        #expect(try command.configuration(environment: ["ENRICH_DB": "other.sqlite"]).databasePath == "y.sqlite")
        let plain = try #require(try EnrichmentServerCommand.parseAsRoot(["import-pois", "f.csv"]) as? ImportPOIs)
        #expect(try plain.configuration(environment: ["ENRICH_DB": "other.sqlite"]).databasePath == "other.sqlite")
    }

    @Test("--version prints the project version, and serve --help lists the settings")
    func versionAndHelp() {
        #expect(message(["--version"]) == BuildInfo.version)
        let help = EnrichmentServerCommand.helpMessage(for: Serve.self)
        #expect(help.contains("--staleness-window <seconds>"))
        #expect(help.contains("ENRICH_STALENESS_WINDOW"))
    }

    @Test("new-api-key takes every access the apps file does, receipt included, and refuses others by name")
    func newAPIKeyAccesses() throws {
        for access in ["admin", "all", "read", "send", "receipt"] {
            let app = access == "admin" ? [] : ["--app", "consumer"]
            #expect(message(["new-api-key", "--name", "k", "--access", access] + app) == nil, "\(access)")
        }
        let refused = message(["new-api-key", "--name", "k", "--access", "bogus", "--app", "consumer"])
        #expect(refused?.contains("admin, all, read, send, receipt") == true, "\(refused ?? "")")
    }
}
