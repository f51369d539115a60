import APNsCore
import ArgumentParser
import EnrichmentCore
import Essentials
import Foundation

/// Where the payload comes from, and whether "now" is stamped into it.
struct PayloadOptions: ParsableArguments {
    @Option(name: .customLong("payload"), help: "Payload file, or - for standard input.")
    var file: String?

    @Option(name: .customLong("payload-json"), help: "The payload inline, as JSON text.")
    var inline: String?

    @Flag(help: "Set aps.timestamp to the current time (string values \"{{now}}\" are always replaced).")
    var stampNow = false

    func validate() throws {
        if file != nil && inline != nil { throw ValidationError("give either --payload or --payload-json, not both") }
    }

    var isGiven: Bool { file != nil || inline != nil }

    static let missing = ValidationError(
        "give the payload with --payload FILE (or - for stdin) or --payload-json TEXT, or a payload after each "
            + "token in --tokens-file (TOKEN {json})")

    /// The payload document with placeholders filled in.
    func load(now: Int64) throws -> JSONValue {
        guard isGiven else { throw Self.missing }
        return try PayloadLoader.load(file: file, inline: inline, now: now, stampNow: stampNow)
    }
}

/// Reads payload files for every subcommand.
enum PayloadLoader {
    /// `fill: false` (a scheduled push) leaves "{{now}}" for the service, which fills it in when each copy is
    /// sent; `stampNow` then sets `aps.timestamp` to "{{now}}".
    static func load(file: String?, inline: String?, now: Int64, stampNow: Bool, fill: Bool = true) throws -> JSONValue
    {
        let data: Data
        let origin: String
        if let inline {
            data = Data(inline.utf8)
            origin = "--payload-json"
        } else if let file, file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
            origin = "standard input"
        } else if let file {
            guard let contents = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read payload file '\(file)': check the path")
            }
            data = contents
            origin = file
        } else {
            throw ValidationError("no payload given")
        }
        return try parse(data, origin: origin, now: now, stampNow: stampNow, fill: fill)
    }

    /// A payload document from bytes read elsewhere (`origin` names them in errors).
    static func parse(_ data: Data, origin: String, now: Int64, stampNow: Bool, fill: Bool = true) throws -> JSONValue {
        let value: JSONValue
        do { value = try JSONParser.parse(data) } catch {
            throw PayloadProblem(message: "\(origin) is not valid JSON: \(error.description)")
        }
        guard case .object = value else {
            throw PayloadProblem(message: "\(origin) must be a JSON object (an APNs payload)")
        }
        guard fill else {
            guard stampNow, case .object(var root) = value else { return value }
            var aps = root["aps"]?.objectValue ?? [:]
            aps["timestamp"] = .string(PayloadStamp.placeholder)
            root["aps"] = .object(aps)
            return .object(root)
        }
        return PayloadStamp.stamp(value, now: now, forceTimestamp: stampNow)
    }
}

/// A payload that cannot be used (exit status 3).
struct PayloadProblem: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
