import APNsClient
import APNsCore
import EnrichmentCore
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
            rows.append([abbreviate(result.deviceToken), result.status.map(String.init) ?? "-", result.reason?.rawValue ?? "",
                         result.apnsID ?? "", String(result.attempts), note])
        }
        let widths = (0..<header.count - 1).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            var line = ""
            for (column, cell) in row.enumerated() {
                line += column < widths.count ? cell.padding(toLength: widths[column] + 2, withPad: " ", startingAt: 0) : cell
            }
            lines.append(line.trimmingCharacters(in: .whitespaces))
        }
        let failed = results.filter { !$0.succeeded }.count
        lines.append("\(results.count - failed) of \(results.count) accepted" + (failed > 0 ? ", \(failed) failed" : "") + ".")
        return lines.joined(separator: "\n")
    }

    static func json(_ results: [APNsSendResult], dryRun: Bool) -> String {
        let items: [JSONValue] = results.map { result in
            var members: [String: JSONValue] = ["token": .string(result.deviceToken), "attempts": .int(Int64(result.attempts))]
            if dryRun {
                members["valid"] = .bool(result.reason == nil)
            } else {
                members["ok"] = .bool(result.succeeded)
            }
            if let status = result.status { members["status"] = .int(Int64(status)) }
            if let reason = result.reason { members["reason"] = .string(reason.rawValue) }
            if let apnsID = result.apnsID { members["apns_id"] = .string(apnsID) }
            if let timestamp = result.timestamp { members["timestamp"] = .int(timestamp) }
            if let error = result.transportError { members["error"] = .string(error) }
            if let hint = result.hint { members["hint"] = .string(hint) }
            return .object(members)
        }
        return String(decoding: JSONWriter.bytes(.array(items)), as: UTF8.self)
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
