import ArgumentParser
import EnrichmentCore
import Essentials
import Foundation

/// `push-sender push --devices-file`: one push to a list of any length, as an open push (`"open": true`) given its
/// devices 1,000 per request and closed at the end. A request that fails is tried again (the service adds a device
/// once, however often it is named), and a run that stopped goes on with `--push-id`.
extension Push {
    /// Device ids per request (the service's limit).
    static let batchSize = 1_000
    /// Tries of one request before the run stops (with the push id to go on with).
    static let attemptsPerBatch = 5

    /// Reads the devices file: one id per line, blank lines and `#` comments skipped, each id checked, a repeated
    /// id kept once (and counted).
    static func readDevices(_ path: String) throws -> (ids: [String], repeated: Int) {
        let text: String
        if path == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("--devices-file: cannot read \(path)")
            }
            text = String(decoding: data, as: UTF8.self)
        }
        var seen = Set<String>()
        var ids: [String] = []
        var repeated = 0
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if let problem = DeviceID.problem(with: line) {
                throw ValidationError("--devices-file \(path), line \(number + 1): '\(line)': \(problem)")
            }
            if seen.insert(line).inserted { ids.append(line) } else { repeated += 1 }
        }
        guard !ids.isEmpty else { throw ValidationError("--devices-file \(path) names no device") }
        return (ids, repeated)
    }

    func sendOpen(_ push: [String: JSONValue], file: String) async throws {
        let (ids, repeated) = try Self.readDevices(file)
        if repeated > 0 { printError("\(repeated) device ids repeated in \(file): each is sent to once") }
        let headers = app.map { ["Enrich-App": $0] } ?? [:]
        var id = pushId
        if id == nil {
            var body = push
            body["open"] = .bool(true)
            body["wait"] = nil
            let answer = try await call("/v1/push", body: .object(body), headers: headers)
            id = answer["push_id"]?.stringValue
        }
        guard let id else { throw ValidationError("the service's answer carries no push_id") }
        printError(
            "push \(id): adding \(ids.count) devices, \(Self.batchSize) a request (to go on after a stop: --push-id \(id))"
        )
        var (added, already, notSent) = (0, 0, 0)
        var start = 0
        while start < ids.count {
            let end = min(ids.count, start + Self.batchSize)
            let body: JSONValue = .object([
                "device_ids": .array(ids[start..<end].map(JSONValue.string)), "close": .bool(end == ids.count),
            ])
            let answer = try await call("/v1/push/\(id)/devices", body: body, headers: headers, pushId: id)
            added += Int(answer["added"]?.lenientDouble ?? 0)
            if case .array(let items)? = answer["already"] { already += items.count }
            if case .array(let items)? = answer["not_sent"] { notSent += items.count }
            start = end
            if end % 10_000 == 0 || end == ids.count { printError("push \(id): \(end) of \(ids.count) devices given") }
        }
        printError("push \(id): \(added) devices added, \(already) already in it, \(notSent) get nothing; closed")
        // Followed until every delivery is final (each GET waits up to the service's ENRICH_PUSH_WAIT_TIMEOUT).
        // A scheduled or paced push is not followed: it ends when its plan says.
        let follow = wait && sendAt == nil && localTime == nil && quietHours == nil && rate == nil
        let path = "/v1/push/\(id)?results=false" + (follow ? "&wait=600" : "")
        var report: JSONValue
        while true {
            let (status, answer) = try await ServiceCall.get(server: server, path: path, headers: headers)
            guard status == 200 || status == 202 else {
                throw ValidationError("GET \(path) answered HTTP \(status); the push goes on (GET /v1/push/\(id))")
            }
            report = answer
            if !follow || answer["done"] == .bool(true) { break }
            printError(Self.summary(answer, id: id).split(separator: "\n").first.map(String.init) ?? "")
            try await Task.sleep(for: .seconds(1))
        }
        if json {
            print(String(decoding: JSONWriter.bytes(report), as: UTF8.self))
        } else {
            print(Self.summary(report, id: id))
        }
        let counts = report["counts"]
        let bad = ["failed", "expired"].reduce(0) { $0 + Int(counts?[$1]?.lenientDouble ?? 0) }
        if notSent > 0 || bad > 0 { throw ExitCode(1) }
    }

    /// One line per figure of the push's report.
    static func summary(_ report: JSONValue, id: String) -> String {
        let counts = report["counts"]
        let states = ["delivered", "failed", "expired", "pending", "cancelled"].map { state in
            "\(JSONWriterText.text(counts?[state] ?? .int(0))) \(state)"
        }
        var lines = [
            "push \(id): \(JSONWriterText.text(report["summary"]?["matched"] ?? .int(0))) devices; "
                + states.joined(separator: ", ")
        ]
        if report["done"] != .bool(true) { lines.append("still under way; follow it with GET /v1/push/\(id)") }
        return lines.joined(separator: "\n")
    }

    /// POSTs `body`, tried again on a network error or a 5xx (adding devices twice adds them once); any other
    /// refusal stops the run with the service's message.
    private func call(_ path: String, body: JSONValue, headers: [String: String], pushId: String? = nil)
        async throws -> JSONValue
    {
        var delay = 0.5
        for attempt in 1...Self.attemptsPerBatch {
            let status: Int
            let answer: JSONValue
            do {
                (status, answer) = try await ServiceCall.post(
                    server: server, path: path, body: body, headers: headers)
            } catch {
                if attempt == Self.attemptsPerBatch { throw stopped(error, pushId: pushId) }
                printError("\(path): \(error); trying again in \(delay) s")
                try await Task.sleep(for: .seconds(delay))
                delay *= 2
                continue
            }
            if status == 200 || status == 201 || status == 202 { return answer }
            let message = answer["error"]?["message"]?.stringValue ?? "HTTP \(status)"
            if status >= 500, attempt < Self.attemptsPerBatch {
                printError("\(path): \(message); trying again in \(delay) s")
                try await Task.sleep(for: .seconds(delay))
                delay *= 2
                continue
            }
            if answer["error"]?["reason"]?.stringValue == "invalid_payload" || status == 413 {
                printError(message)
                throw ExitCode(3)
            }
            throw stopped("the service refused it: \(message)", pushId: pushId)
        }
        throw stopped("no answer", pushId: pushId)
    }

    private func stopped(_ why: Any, pushId: String?) -> ValidationError {
        guard let pushId else { return ValidationError("\(why)") }
        return ValidationError(
            "\(why). Go on with the same file and --push-id \(pushId) (ids already added are skipped).")
    }
}
