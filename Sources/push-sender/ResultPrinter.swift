import APNsClient
import APNsCore
import EnrichmentCore
import Essentials
import Foundation
import Synchronization

/// Per-token results as a table or JSON.
enum ResultPrinter {
    static func abbreviate(_ token: String) -> String {
        token.count > 16 ? "\(token.prefix(8))…\(token.suffix(4))" : token
    }

    static func table(_ results: [APNsSendResult]) -> String {
        var lines = [String]()
        let header = ["TOKEN", "STATUS", "REASON", "APNS-ID", "TRIES", "NOTE"]
        var rows = [header]
        for result in results {
            var note = result.transportError ?? result.hint ?? ""
            if let timestamp = result.timestamp {
                let date = Date(timeIntervalSince1970: Double(timestamp) / 1000)
                note = "invalid since \(ISO8601DateFormatter().string(from: date))" + (note.isEmpty ? "" : "; \(note)")
            }
            rows.append([
                abbreviate(result.deviceToken), result.status.map(String.init) ?? "-", result.reason?.rawValue ?? "",
                result.apnsID ?? "", String(result.attempts), note,
            ])
        }
        let widths = (0..<header.count - 1).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            var line = ""
            for (column, cell) in row.enumerated() {
                line +=
                    column < widths.count
                    ? cell.padding(toLength: widths[column] + 2, withPad: " ", startingAt: 0) : cell
            }
            lines.append(line.trimmingCharacters(in: .whitespaces))
        }
        let failed = results.filter { !$0.succeeded }.count
        lines.append(
            "\(results.count - failed) of \(results.count) accepted" + (failed > 0 ? ", \(failed) failed" : "") + ".")
        return lines.joined(separator: "\n")
    }

    /// The dry-run summary: what would be sent, and each token refused locally.
    static func dryRun(_ batch: APNsBatch) -> String {
        var lines = [
            "Dry run: payload \(batch.payloadSize) of \(batch.pushType.maximumPayloadSize) bytes, topic \(batch.topic), "
                + "push type \(batch.pushType.rawValue)"
                + (batch.requests.first?.priority.map { ", priority \($0)" } ?? "") + ".",
            "\(batch.sendableCount) of \(batch.requests.count) tokens are well-formed; nothing was sent.",
        ]
        for (index, violation) in batch.localRefusals.sorted(by: { $0.key < $1.key }) {
            lines.append("  \(abbreviate(batch.requests[index].deviceToken)): \(violation.message)")
        }
        return lines.joined(separator: "\n")
    }

    static func json(_ results: [APNsSendResult], dryRun: Bool) -> String {
        String(decoding: JSONWriter.array(results.map { ResultView(result: $0, dryRun: dryRun) }), as: UTF8.self)
    }

    /// One token's result in `--json` output (members in alphabetical order).
    struct ResultView: JSONObjectRepresentable {
        var result: APNsSendResult
        var dryRun: Bool

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("apns_id", result.apnsID)
            object.field("attempts", result.attempts)
            object.field("error", result.transportError)
            object.field("hint", result.hint)
            if !dryRun { object.field("ok", result.succeeded) }
            object.field("reason", result.reason?.rawValue)
            object.field("status", result.status.map(Int64.init))
            object.field("timestamp", result.timestamp)
            object.field("token", result.deviceToken)
            if dryRun { object.field("valid", result.reason == nil) }
        }
    }
}

/// A one-line progress bar on standard error, only when it is a terminal.
final class ProgressBar: Sendable {
    let total: Int
    let enabled: Bool
    private let last = Mutex(-1)

    init(total: Int, enabled: Bool) {
        self.total = total
        self.enabled = enabled && isatty(STDERR_FILENO) != 0
    }

    func update(_ done: Int) {
        guard enabled, total > 0 else { return }
        let percent = done * 100 / total
        let changed = last.withLock { previous in
            defer { previous = percent }
            return previous != percent || done == total
        }
        guard changed else { return }
        let width = 30
        let filled = done * width / total
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        FileHandle.standardError.write(Data("\r[\(bar)] \(done)/\(total) (\(percent)%)".utf8))
    }

    func finish() {
        if enabled { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
