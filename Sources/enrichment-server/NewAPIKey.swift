import ArgumentParser
import Crypto
import EnrichmentCore
import EnrichmentRuntime
import Foundation

/// `enrichment-server new-api-key`: a new random API key and the `keys` entry of the apps file that holds its
/// SHA-256 (the key itself is printed once, to be given to whoever uses it, and never stored by the service).
struct NewAPIKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new-api-key",
        abstract: "Make a random API key and print the apps file entry that holds its SHA-256 (docs/APPS.md).",
        discussion:
            "The key goes to stdout's first line, the JSON entry to the second: keep the key out of the apps file.")

    @Option(help: "The key's name in the apps file (lower-case letters, digits and '-').")
    var name: String

    @Option(help: "admin, all, read, send or receipt (a notification extension's: receipts only).")
    var access: String = "all"

    @Option(help: "The app the key reaches (not for admin keys).")
    var app: String?

    func validate() throws {
        let accesses = APIKeyDefinition.Access.allCases.map(\.rawValue)
        guard accesses.contains(access) else {
            throw ValidationError("--access must be one of \(accesses.joined(separator: ", "))")
        }
        if access == "admin", app != nil { throw ValidationError("an admin key reaches every app: drop --app") }
        if access != "admin", app == nil { throw ValidationError("a key with access \(access) needs --app") }
        guard AppNamespace.isValidName(name) else {
            throw ValidationError("--name is 1 to 64 lower-case letters, digits and '-'")
        }
    }

    func run() throws {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let key = "ek_" + bytes.map { String(format: "%02x", $0) }.joined()
        let digest = SHA256.hash(data: Data(key.utf8)).map { String(format: "%02x", $0) }.joined()
        var entry = #"{"name": "\#(name)", "sha256": "\#(digest)", "access": "\#(access)""#
        if let app { entry += #", "app": "\#(app)""# }
        print(key)
        print(entry + "}")
    }
}
