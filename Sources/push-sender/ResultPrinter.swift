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
        let failed = results.filter { !$0.succeeded }.count
        return rows(results) + "\n"
            + "\(results.count - failed) of \(results.count) accepted" + (failed > 0 ? ", \(failed) failed" : "") + "."
    }

    /// The results as aligned rows under a header.
    static func rows(_ results: [APNsSendResult], idColumn: String = "APNS-ID") -> String {
        var lines = [String]()
        let header = ["TOKEN", "STATUS", "REASON", idColumn, "TRIES", "NOTE"]
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
        /// The token's position in the input (0-based), so streamed lines can be matched to it.
        var index: Int?
        /// The member of the service's id of the push: `apns_id`, or `name` (FCM's message name).
        var idField = "apns_id"

        func writeJSON(into object: inout JSONObjectWriter) {
            let fcm = idField != "apns_id"
            if !fcm { object.field("apns_id", result.apnsID) }
            object.field("attempts", result.attempts)
            object.field("error", result.transportError)
            if !fcm { object.field("hint", result.hint) }
            if let index { object.field("index", index) }
            if fcm { object.field("name", result.apnsID) }
            if !dryRun { object.field("ok", result.succeeded) }
            object.field("reason", result.reason?.rawValue)
            object.field("status", result.status.map(Int64.init))
            object.field("timestamp", result.timestamp)
            object.field("token", result.deviceToken)
            if dryRun { object.field("valid", result.reason == nil) }
        }
    }
}

/// Results as they arrive: JSON Lines written at once (nothing kept), or table rows kept for the end (in input
/// order); then a summary with the elapsed time and rate.
final class ResultOutput: Sendable {
    private struct State {
        var rows: [(Int, APNsSendResult)] = []
        var done = 0
        var failed = 0
        var retried = 0
        /// Accepted pushes left out of the table (runs over `listLimit`).
        var unlisted = 0
        var trimmed = false
    }

    /// Past this many pushes the table lists only the failures (and counts the rest): a run of a million tokens
    /// holds its failures, not a row per success.
    static let listLimit = 1_000

    let json: Bool
    let failuresOnly: Bool
    let total: Int
    /// The table's heading of the id a service gives each push (APNS-ID; MESSAGE for FCM's message name).
    let idColumn: String
    private let state = Mutex(State())
    private let lines: JSONLineWriter

    init(json: Bool, failuresOnly: Bool, total: Int, idColumn: String = "APNS-ID") {
        self.json = json
        self.failuresOnly = failuresOnly
        self.total = total
        self.idColumn = idColumn
        lines = JSONLineWriter(idField: idColumn == "APNS-ID" ? "apns_id" : "name")
    }

    var failed: Int { state.withLock { $0.failed } }

    /// Records one result; returns how many are done.
    @discardableResult
    func add(_ index: Int, _ result: APNsSendResult, dryRun: Bool = false) -> Int {
        let failed = dryRun ? result.reason != nil || result.transportError != nil : !result.succeeded
        let shown = !failuresOnly || failed
        let done = state.withLock { state in
            state.done += 1
            if failed { state.failed += 1 }
            if result.attempts > 1 { state.retried += 1 }
            if shown && !json {
                if state.done > Self.listLimit, !state.trimmed {
                    // The run is over the limit: the successes listed so far go too.
                    state.trimmed = true
                    let before = state.rows.count
                    state.rows.removeAll { $0.1.succeeded }
                    state.unlisted += before - state.rows.count
                }
                if !state.trimmed || !result.succeeded {
                    state.rows.append((index, result))
                } else {
                    state.unlisted += 1
                }
            }
            return state.done
        }
        // The line is made and written by the writer's own thread, many lines per write: the sender's event
        // loops only hand the result over.
        if shown && json { lines.add(index, result, dryRun: dryRun) }
        return done
    }

    /// Writes every JSON line queued so far (the summary does it too).
    func flush() { lines.close() }

    /// The table (human output) and the summary line.
    func finish(elapsed: Duration, statistics: APNsSenderStatistics?, quiet: Bool) {
        lines.close()
        let state = state.withLock { $0 }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var summary =
            "\(state.done - state.failed) of \(state.done) accepted"
            + (state.failed > 0 ? ", \(state.failed) failed" : "")
        if state.retried > 0 { summary += ", \(state.retried) retried" }
        summary += String(format: " in %.2f s (%.0f pushes/s)", seconds, seconds > 0 ? Double(state.done) / seconds : 0)
        if let statistics {
            var connections =
                "\(statistics.connectionsOpened) connection\(statistics.connectionsOpened == 1 ? "" : "s")"
            if statistics.drained > 0 { connections += ", \(statistics.drained) drained (GOAWAY)" }
            if statistics.resentUnprocessed > 0 {
                connections += ", \(statistics.resentUnprocessed) resent unprocessed"
            }
            if statistics.lostWithConnection > 0 {
                connections += ", \(statistics.lostWithConnection) in flight on lost connections"
            }
            summary += "; \(connections)."
        } else {
            summary += "."
        }
        if json {
            if !quiet { FileHandle.standardError.write(Data((summary + "\n").utf8)) }
            return
        }
        let rows = state.rows.sorted { $0.0 < $1.0 }.map(\.1)
        var text = rows.isEmpty ? "" : ResultPrinter.rows(rows, idColumn: idColumn) + "\n"
        if state.unlisted > 0 {
            text +=
                "\(state.unlisted) accepted pushes not listed: over \(Self.listLimit) pushes only the failures are "
                + "listed (--json lists every push).\n"
        }
        text += summary
        print(text)
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

/// Writes results as JSON Lines to standard output from a thread of its own: results are queued, and the thread
/// turns everything queued into lines and writes them with one call, so a fast sender does not make one system
/// call per push and its event loops do not format lines. Lines come out in the order results were queued.
final class JSONLineWriter: Sendable {
    private struct Queue {
        var pending: [(Int, APNsSendResult, Bool)] = []
        var closed = false
    }

    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let started = Mutex(false)
    /// The member that carries the service's id of a push: `apns_id`, or `name` for FCM.
    let idField: String

    init(idField: String = "apns_id") { self.idField = idField }

    /// Queues one result's line.
    func add(_ index: Int, _ result: APNsSendResult, dryRun: Bool) {
        startIfNeeded()
        let wasEmpty = queue.withLock { queue in
            queue.pending.append((index, result, dryRun))
            return queue.pending.count == 1
        }
        // One wake-up per drain: the thread takes everything queued until then.
        if wasEmpty { wake.signal() }
    }

    /// Writes what is queued and stops the thread; returns once every line is written.
    func close() {
        let first = queue.withLock { queue in
            defer { queue.closed = true }
            return !queue.closed
        }
        guard first, started.withLock({ $0 }) else { return }
        wake.signal()
        done.wait()
    }

    private func startIfNeeded() {
        let start = started.withLock { started in
            defer { started = true }
            return !started
        }
        guard start else { return }
        let thread = Thread { [self] in run() }
        thread.name = "json-lines"
        thread.start()
    }

    private func run() {
        var bytes: [UInt8] = []
        while true {
            wake.wait()
            // Let lines gather for a moment: one wake-up and one write per ~2 ms, not one per few answers (each
            // wake-up is a thread switch on the cores that send).
            if !queue.withLock({ $0.closed }) { usleep(2000) }
            let (batch, closed) = queue.withLock { queue in
                defer { queue.pending.removeAll(keepingCapacity: true) }
                return (queue.pending, queue.closed)
            }
            bytes.removeAll(keepingCapacity: true)
            for (index, result, dryRun) in batch {
                bytes +=
                    ResultPrinter.ResultView(
                        result: result, dryRun: dryRun, index: index, idField: idField
                    ).jsonBytes
                bytes.append(UInt8(ascii: "\n"))
            }
            if !bytes.isEmpty { FileHandle.standardOutput.write(Data(bytes)) }
            if closed {
                done.signal()
                return
            }
        }
    }
}
