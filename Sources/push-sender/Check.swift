public import ArgumentParser
import EnrichmentCore
import Essentials
import Foundation

/// `push-sender check`: the staleness verdict for a payload, with the same code the service uses.
struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Judge a payload's timestamp against the staleness window.",
        discussion: """
            Exit status: 0 fresh, 1 stale, 2 no usable timestamp, 3 not a valid payload. Stale means \
            timestamp + window < floor(now): exactly 300 s old is fresh, 301 s is stale.
            """)

    @Argument(help: "The payload file (or - for standard input).") var file: String
    @Option(help: "Evaluate as of this epoch time (default: now; fractions are floored).") var now: Double?
    @Option(help: "Staleness window in seconds.") var window: Int64 = 300
    @Option(help: "Also reject timestamps more than this many seconds in the future.") var maxFutureSkew: Int64?
    @Option(help: "default (also reads the legacy top-level shape and numeric strings) or woosmap (SDK-exact).")
    var mode: BodyMode = .default
    @Flag(help: "Print the verdict as JSON.") var json = false

    func validate() throws {
        if let now, !StalenessPolicy.evaluableSeconds.contains(now.rounded(.down)) {
            throw ValidationError("--now must be epoch seconds from 0 to 253402300799 (9999-12-31T23:59:59Z)")
        }
        if window < 0 { throw ValidationError("--window must be >= 0 seconds") }
        if let maxFutureSkew, maxFutureSkew < 0 { throw ValidationError("--max-future-skew must be >= 0 seconds") }
    }

    func run() async throws {
        let instant = now.map { Date(timeIntervalSince1970: $0) } ?? Date()
        let payload: NotificationPayload
        do {
            // Placeholders take the real time (when the push is made); --now is when the phone receives it.
            let value = try PayloadLoader.load(
                file: file, inline: nil, now: Int64(Date().timeIntervalSince1970), stampNow: false)
            payload = try NotificationPayload(json: value)
        } catch {
            printError("\(error)")
            throw ExitCode(3)
        }
        let verdict = StalenessPolicy(window: window, maxFutureSkew: maxFutureSkew).evaluate(
            payload.readTimestamp(mode: mode), now: instant)
        if json {
            var writer = JSONObjectWriter()
            verdict.write(into: &writer)
            writer.field("now", Int64(instant.timeIntervalSince1970.rounded(.down)))
            writer.field("window", window)
            writer.field("mode", mode.rawValue)
            print(String(decoding: writer.finished(), as: UTF8.self))
        } else {
            var line = "\(verdict.state.rawValue.uppercased()) (\(verdict.rule.rawValue))"
            if let age = verdict.ageSeconds, let timestamp = verdict.timestamp {
                line +=
                    ": timestamp \(timestamp) is \(age >= 0 ? "\(age) s old" : "\(-age) s in the future"), window \(window) s"
            }
            if let source = verdict.source { line += " [read from \(source.rawValue)]" }
            if let detail = verdict.detail, verdict.state == .noTimestamp { line += ": \(detail)" }
            print(line)
        }
        switch verdict.state {
        case .fresh: return
        case .stale: throw ExitCode(1)
        case .noTimestamp: throw ExitCode(2)
        }
    }
}

extension BodyMode: ExpressibleByArgument {}

func printError(_ message: String) {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
}
