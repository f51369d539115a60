public import ArgumentParser
import EnrichmentCore
import Essentials
import Foundation

/// `push-sender check`: staleness verdicts for one payload or many, at one moment or several, with the code the
/// service uses.
struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Judge payload timestamps against the staleness window: files, directories, or JSON Lines on stdin.",
        discussion: """
            Stale means timestamp + window < floor(now): exactly 300 s old is fresh, 301 s is stale. Each payload \
            gets a row (verdict, rule, age, and hints such as a timestamp in milliseconds), then a summary; with \
            --json, one JSON object per verdict (JSON Lines). With --ages or --at each payload is judged at several \
            moments (a table per payload).

            Exit status: 0 every verdict fresh; otherwise the highest of 1 (a stale one), 2 (one without a usable \
            timestamp), 3 (a payload that is not valid).

            Examples:
              push-sender check payloads/                             # every *.json in the folder
              push-sender check a.json b.json --ages 299,300,301      # each judged at timestamp + 299, 300, 301
              cat payloads.jsonl | push-sender check --json           # one payload per line
            """)

    @Argument(
        help: ArgumentHelp(
            "Payload files or folders (their *.json files, sorted); - or nothing reads standard input.",
            discussion: "Standard input holds one JSON payload, or several as JSON Lines (one per line)."))
    var files: [String] = []
    @Option(help: "Evaluate as of this epoch time (default: now; fractions are floored).") var now: Double?
    @Option(
        name: .customLong("at"),
        help: "Evaluate at each of these epoch times (comma-separated, or the option repeated).")
    var at: [String] = []
    @Option(help: "Evaluate at timestamp + each of these ages in seconds, e.g. 299,300,301.") var ages: String?
    @Option(help: "Staleness window in seconds.") var window: Int64 = 300
    @Option(help: "Also reject timestamps more than this many seconds in the future.") var maxFutureSkew: Int64?
    @Option(help: "default (also reads the legacy top-level shape and numeric strings) or woosmap (SDK-exact).")
    var mode: BodyMode = .default
    @Flag(help: "One JSON object per verdict (JSON Lines).") var json = false

    /// When each payload is judged.
    enum Moments {
        case instants([Double])
        case ages([Int64])
    }

    func moments() throws -> Moments {
        if now != nil, !at.isEmpty || ages != nil {
            throw ValidationError("give one of --now, --at and --ages")
        }
        if !at.isEmpty, ages != nil { throw ValidationError("give either --at or --ages, not both") }
        if let ages {
            var values: [Int64] = []
            for part in ages.split(separator: ",") {
                guard let age = Int64(part.trimmingCharacters(in: .whitespaces)) else {
                    throw ValidationError(
                        "--ages: '\(part)' is not a whole number of seconds (e.g. --ages 299,300,301)")
                }
                values.append(age)
            }
            guard !values.isEmpty else { throw ValidationError("--ages needs at least one number, e.g. 299,300,301") }
            return .ages(values)
        }
        var instants: [Double] = []
        for part in at.flatMap({ $0.split(separator: ",") }) {
            guard let value = Double(part.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError("--at: '\(part)' is not epoch seconds")
            }
            instants.append(value)
        }
        if let now { instants = [now] }
        for value in instants where !StalenessPolicy.evaluableSeconds.contains(value.rounded(.down)) {
            throw ValidationError(
                "--now/--at must be epoch seconds from 0 to 253402300799 (9999-12-31T23:59:59Z); got \(value)")
        }
        return .instants(instants)
    }

    func validate() throws {
        _ = try moments()
        if window < 0 { throw ValidationError("--window must be >= 0 seconds") }
        if let maxFutureSkew, maxFutureSkew < 0 { throw ValidationError("--max-future-skew must be >= 0 seconds") }
    }

    /// One payload to judge: where it came from, and the payload or why it cannot be read.
    struct Input {
        var label: String
        var payload: Result<NotificationPayload, PayloadProblem>
    }

    func inputs() throws -> [Input] {
        let made = Int64(Date().timeIntervalSince1970)
        func read(_ data: Data, label: String) -> Input {
            // Placeholders take the real time (when the push is made); --now is when the phone receives it.
            do {
                let value = try PayloadLoader.parse(data, origin: label, now: made, stampNow: false)
                return Input(label: label, payload: .success(try NotificationPayload(json: value)))
            } catch let problem as PayloadProblem {
                return Input(label: label, payload: .failure(problem))
            } catch {
                return Input(label: label, payload: .failure(PayloadProblem(message: "\(label): \(error)")))
            }
        }
        var result: [Input] = []
        for name in files.isEmpty ? ["-"] : files {
            if name == "-" {
                let data = FileHandle.standardInput.readDataToEndOfFile()
                if (try? JSONParser.parse(data)) != nil {
                    result.append(read(data, label: "stdin"))
                    continue
                }
                // Not one document: JSON Lines, one payload per non-blank line.
                let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
                for (number, line) in lines.enumerated()
                where !line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == 9 }) {
                    result.append(read(Data(line), label: "stdin:\(number + 1)"))
                }
                if result.isEmpty { result.append(read(data, label: "stdin")) }
                continue
            }
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: name, isDirectory: &isFolder) else {
                throw ValidationError("cannot read '\(name)': no such file or folder")
            }
            if isFolder.boolValue {
                let entries = (try? FileManager.default.contentsOfDirectory(atPath: name)) ?? []
                let payloads = entries.filter { $0.hasSuffix(".json") }.sorted()
                guard !payloads.isEmpty else { throw ValidationError("folder '\(name)' has no *.json files") }
                for entry in payloads {
                    let path = (name as NSString).appendingPathComponent(entry)
                    result.append(read(FileManager.default.contents(atPath: path) ?? Data(), label: path))
                }
            } else {
                guard let data = FileManager.default.contents(atPath: name) else {
                    throw ValidationError("cannot read '\(name)': check the permissions")
                }
                result.append(read(data, label: name))
            }
        }
        return result
    }

    func run() async throws {
        let policy = StalenessPolicy(window: window, maxFutureSkew: maxFutureSkew)
        let moments = try moments()
        let inputs = try inputs()
        let single = inputs.count == 1
        var worst: Int32 = 0
        var counts: [String: Int] = [:]
        for input in inputs {
            let payload: NotificationPayload
            switch input.payload {
            case .failure(let problem):
                worst = max(worst, 3)
                counts["invalid", default: 0] += 1
                if json {
                    emit(["file": .string(input.label), "state": .string("invalid"), "error": .string(problem.message)])
                } else {
                    print(single ? "INVALID: \(problem.message)" : "\(input.label)  INVALID: \(problem.message)")
                }
                continue
            case .success(let value): payload = value
            }
            let reading = payload.readTimestamp(mode: mode)
            let instants: [Date]
            switch moments {
            case .instants(let values):
                instants = values.isEmpty ? [Date()] : values.map { Date(timeIntervalSince1970: $0) }
            case .ages(let values):
                // Without a timestamp there is nothing to add an age to: one verdict, as of now.
                instants =
                    reading.timestamp.map { t in values.map { Date(timeIntervalSince1970: Double(t) + Double($0)) } }
                    ?? [Date()]
            }
            for instant in instants {
                let verdict = policy.evaluate(reading, now: instant)
                counts[verdict.state.rawValue, default: 0] += 1
                switch verdict.state {
                case .fresh: break
                case .stale: worst = max(worst, 1)
                case .noTimestamp: worst = max(worst, 2)
                }
                if json {
                    var object = JSONObjectWriter()
                    object.field("file", input.label)
                    verdict.write(into: &object)
                    object.field("now", Int64(instant.timeIntervalSince1970.rounded(.down)))
                    object.field("window", window)
                    object.field("max_future_skew", maxFutureSkew)
                    object.field("mode", mode.rawValue)
                    object.field("hints", strings: verdict.hints)
                    print(String(decoding: object.finished(), as: UTF8.self))
                } else {
                    let row = Self.describe(verdict, window: window, at: instant, showAt: instants.count > 1)
                    print(single ? row : "\(input.label)  \(row)")
                    for hint in verdict.hints { print("  hint: \(hint)") }
                }
            }
        }
        if !json, !(inputs.count == 1 && counts.values.reduce(0, +) == 1) {
            let order = ["fresh", "stale", "no_timestamp", "invalid"]
            let parts = order.map { "\(counts[$0] ?? 0) \($0.replacingOccurrences(of: "_", with: " "))" }
            print("\(inputs.count) payload\(inputs.count == 1 ? "" : "s"): " + parts.joined(separator: ", "))
        }
        if worst != 0 { throw ExitCode(worst) }
    }

    func emit(_ object: [String: JSONValue]) {
        print(String(decoding: JSONWriter.bytes(.object(object)), as: UTF8.self))
    }

    /// One verdict as a line: `FRESH (within_window): timestamp T is N s old, window W s [read from …]`.
    static func describe(_ verdict: StalenessVerdict, window: Int64, at instant: Date, showAt: Bool) -> String {
        var line = "\(verdict.state.rawValue.uppercased()) (\(verdict.rule.rawValue))"
        if let age = verdict.ageSeconds, let timestamp = verdict.timestamp {
            line +=
                ": timestamp \(timestamp) is \(age >= 0 ? "\(age) s old" : "\(-age) s in the future"), window \(window) s"
        }
        if showAt { line += " at \(Int64(instant.timeIntervalSince1970.rounded(.down)))" }
        if let source = verdict.source { line += " [read from \(source.rawValue)]" }
        if let detail = verdict.detail, verdict.state == .noTimestamp { line += ": \(detail)" }
        return line
    }
}

extension BodyMode: ExpressibleByArgument {}

func printError(_ message: String) {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
}
