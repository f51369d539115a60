import APNsCore
import ArgumentParser
import AsyncHTTPClient
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import NIOCore
import NIOHTTP1

/// `push-sender push`: send through the service (enrich per device, deliver to each registered token).
struct Push: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a push to devices through the enrichment service (POST /v1/push) and print each delivery.",
        discussion: """
            The service enriches the payload for each device from its own last fix, at the moment of sending, and \
            sends it to every active APNs token registered for the device (PUT /v1/devices/ID/apns-tokens/TOKEN). \
            ENRICH_API_KEY is sent as the bearer token. Exit status: 0 every delivery was accepted by APNs (or the \
            push was queued with --no-wait); 1 some delivery failed, expired, or a device had no active token; \
            3 the payload is not valid.

            Example:
              push-sender push --server http://127.0.0.1:8080 --device dev-1 --device dev-2 payloads/location.json
            """)

    @Argument(help: "The payload file (or - for standard input).") var file: String
    @Option(help: "Base URL of the running enrichment service.") var server = "http://127.0.0.1:8080"
    @Option(name: .customLong("device"), help: "A device id; repeat for several (1 to 1000).") var devices: [String] =
        []
    @Option(
        help: ArgumentHelp(
            "Send to every device id of FILE (one per line; blank lines and # comments skipped), however many: one open push, 1000 ids a request (docs/DELIVERY.md).",
            valueName: "file"))
    var devicesFile: String?
    @Option(
        help:
            "With --devices-file: add to this open push instead of making one (a run that stopped is run again with the id it printed: ids already in the push are not added twice)."
    ) var pushId: String?
    @Option(
        help: ArgumentHelp(
            "Send to an audience instead of --device: JSON such as '{\"near\":{\"poi_id\":\"s1\",\"radius_m\":500}}', or @FILE (docs/AUDIENCES.md).",
            valueName: "json"))
    var audience: String?
    @Option(help: "The app to act in (Enrich-App; an admin key's choice, an app's key has its own).") var app: String?
    @Option(help: "apns-push-type (alert, background, voip, ...).") var pushType: String?
    @Option(help: "apns-priority: 10, 5 or 1 (background defaults to 5).") var priority: Int?
    @Option(help: "apns-expiration, epoch seconds (0: deliver once, do not store).") var expiration: Int64?
    @Option(help: "apns-collapse-id (at most 64 bytes).") var collapseId: String?
    @Option(help: "apns-topic for every token (default: each registration's bundle id).") var topic: String?
    @Option(help: ArgumentHelp(ServiceConfiguration.settings.help(for: "mode"))) var mode: BodyMode?
    @Flag(help: "Send the payload as it is, without enrichment.") var noEnrich = false
    @Flag(
        inversion: .prefixedNo,
        help: "Wait for every delivery's final status (the service waits up to ENRICH_PUSH_WAIT_TIMEOUT).")
    var wait = true
    @Flag(help: "Set aps.timestamp to now before sending.") var stampNow = false
    @Option(help: "Send at this instant (epoch seconds), not before (docs/AUDIENCES.md).") var sendAt: Double?
    @Option(help: "Send at HH:MM in each device's own time zone, e.g. 09:30.") var localTime: String?
    @Option(help: "Deliveries per second (0.01 to 1000000): a paced push, so not everyone gets it at once.")
    var rate: Double?
    @Option(help: "Quiet hours in each device's zone, HH:MM-HH:MM (e.g. 22:00-08:00); see --quiet-action.")
    var quietHours: String?
    @Option(help: "What quiet hours do: hold (send when they end) or drop.") var quietAction: String?
    @Option(help: "A device without a time zone: skip, or app_default (the app's).") var missingTimeZone: String?
    @Option(help: "Frequency cap, MAX/SECONDS (e.g. 3/86400), or none to lift the app's.") var cap: String?
    @Option(
        help:
            "POST the push's report here once every delivery is final (its host must be in the service's ENRICH_PUSH_CALLBACK_HOSTS)."
    ) var callbackURL: String?
    @Flag(help: "Print the service's answer as JSON.") var json = false

    func validate() throws {
        let given = [!devices.isEmpty, audience != nil, devicesFile != nil].filter { $0 }.count
        guard given == 1 else {
            throw ValidationError(
                given == 0
                    ? "name at least one --device, a --devices-file or an --audience"
                    : "give one of --device, --devices-file and --audience")
        }
        if pushId != nil, devicesFile == nil { throw ValidationError("--push-id needs --devices-file") }
        guard devices.count <= 1000 else {
            throw ValidationError("at most 1000 --device per push; a longer list goes in a --devices-file")
        }
        for device in devices {
            if let problem = DeviceID.problem(with: device) { throw ValidationError("--device \(device): \(problem)") }
        }
        if !(server.hasPrefix("http://") || server.hasPrefix("https://")) {
            throw ValidationError("--server must be an http(s) URL such as http://127.0.0.1:8080")
        }
    }

    func run() async throws {
        let payload: JSONValue
        do {
            // A scheduled push keeps its "{{now}}": the service fills it in when each copy is sent.
            let scheduled = sendAt != nil || localTime != nil || quietHours != nil
            payload = try PayloadLoader.load(
                file: file, inline: nil, now: Int64(Date().timeIntervalSince1970), stampNow: stampNow,
                fill: !scheduled)
        } catch {
            printError("\(error)")
            throw ExitCode(3)
        }
        var body: [String: JSONValue] = ["payload": payload, "wait": .bool(wait), "enrich": .bool(!noEnrich)]
        if let audience {
            let text: String
            if audience.hasPrefix("@") {
                guard let data = FileManager.default.contents(atPath: String(audience.dropFirst())) else {
                    throw ValidationError("--audience: cannot read \(audience.dropFirst())")
                }
                text = String(decoding: data, as: UTF8.self)
            } else {
                text = audience
            }
            guard let parsed = try? JSONParser.parse(Array(text.utf8)), case .object = parsed else {
                throw ValidationError(
                    "--audience must be a JSON object, e.g. '{\"near\":{\"latitude\":48.85,\"longitude\":2.29,\"radius_m\":500}}'"
                )
            }
            body["audience"] = parsed
        } else if devicesFile == nil {
            body["device_ids"] = .array(devices.map(JSONValue.string))
        }
        if let pushType { body["push_type"] = .string(pushType) }
        if let priority { body["priority"] = .int(Int64(priority)) }
        if let expiration { body["expiration"] = .int(expiration) }
        if let collapseId { body["collapse_id"] = .string(collapseId) }
        if let topic { body["topic"] = .string(topic) }
        if let mode { body["mode"] = .string(mode.rawValue) }
        if let sendAt { body["send_at"] = .double(sendAt) }
        if let localTime { body["local_time"] = .string(localTime) }
        if let quietHours {
            var quiet: [String: JSONValue] = ["window": .string(quietHours)]
            if let quietAction { quiet["action"] = .string(quietAction) }
            body["quiet_hours"] = .object(quiet)
        } else if quietAction != nil {
            throw ValidationError("--quiet-action needs --quiet-hours")
        }
        if let missingTimeZone { body["missing_time_zone"] = .string(missingTimeZone) }
        if let cap {
            if cap == "none" {
                body["cap"] = JSONValue.null
            } else {
                let parts = cap.split(separator: "/")
                guard parts.count == 2, let max = Int64(parts[0]), let window = Double(parts[1]) else {
                    throw ValidationError("--cap is MAX/SECONDS (e.g. 3/86400) or none")
                }
                body["cap"] = .object(["max": .int(max), "window_s": .double(window)])
            }
        }
        if let callbackURL { body["callback_url"] = .string(callbackURL) }
        if let rate { body["rate"] = .double(rate) }
        if let devicesFile { return try await sendOpen(body, file: devicesFile) }
        let (status, answer) = try await ServiceCall.post(
            server: server, path: "/v1/push", body: .object(body), headers: app.map { ["Enrich-App": $0] } ?? [:])
        guard status == 200 || status == 202 else {
            let message = answer["error"]?["message"]?.stringValue ?? "HTTP \(status)"
            if answer["error"]?["reason"]?.stringValue == "invalid_payload" || status == 413 {
                printError(message)
                throw ExitCode(3)
            }
            throw ValidationError("the service refused the push: \(message)")
        }
        if json {
            print(String(decoding: JSONWriter.bytes(answer), as: UTF8.self))
        } else {
            print(PushView.render(answer, server: server))
        }
        if PushView.hasFailures(answer) { throw ExitCode(1) }
    }
}

/// The service's push answer for people.
enum PushView {
    static func render(_ answer: JSONValue, server: String) -> String {
        var lines: [String] = []
        let id = answer["push_id"]?.stringValue ?? "?"
        guard case .array(let devices)? = answer["devices"] else {
            // Queued (wait false, or the wait ran out).
            lines.append("push \(id) accepted: \(JSONWriterText.text(answer["deliveries"] ?? .int(0))) queued")
            if case .array(let notSent)? = answer["not_sent"] {
                for device in notSent {
                    lines.append(
                        "  \(device["device_id"]?.stringValue ?? "?"): not sent (\(device["rule"]?.stringValue ?? "?"))"
                    )
                }
            }
            lines.append("status: curl \(server.trimmingCharacters(in: CharacterSet(charactersIn: "/")))/v1/push/\(id)")
            return lines.joined(separator: "\n")
        }
        for device in devices {
            let outcome = device["outcome"]?.stringValue ?? "?"
            let rule = device["rule"]?.stringValue ?? "?"
            lines.append("\(device["device_id"]?.stringValue ?? "?"): \(outcome) (\(rule))")
            guard case .array(let deliveries)? = device["deliveries"] else { continue }
            for delivery in deliveries {
                let token = delivery["token"]?.stringValue ?? ""
                var line = "  \(DeviceTokenFormat.redacted(token)) \(delivery["environment"]?.stringValue ?? "")"
                line += "  \(delivery["state"]?.stringValue ?? "?")"
                if let status = delivery["status"] { line += " \(JSONWriterText.text(status))" }
                if let reason = delivery["reason"]?.stringValue { line += " \(reason)" }
                line += "  attempts \(JSONWriterText.text(delivery["attempts"] ?? .int(0)))"
                if let apnsID = delivery["apns_id"]?.stringValue { line += "  apns-id \(apnsID)" }
                if let error = delivery["error"]?.stringValue, delivery["reason"] == nil { line += "  (\(error))" }
                if let hint = delivery["reason"]?.stringValue.flatMap({ APNsReason(rawValue: $0).hint(for: .service) })
                {
                    line += "\n    hint: \(hint)"
                }
                lines.append(line)
            }
        }
        let counts = answer["counts"]
        let summary = ["delivered", "failed", "expired", "pending"].map { state in
            "\(JSONWriterText.text(counts?[state] ?? .int(0))) \(state)"
        }
        lines.append("push \(id): " + summary.joined(separator: ", "))
        if answer["done"] == .bool(false) {
            lines.append("still pending; follow it with GET /v1/push/\(id)")
        }
        return lines.joined(separator: "\n")
    }

    /// True when a delivery failed or expired, or a device got nothing.
    static func hasFailures(_ answer: JSONValue) -> Bool {
        if case .array(let notSent)? = answer["not_sent"], !notSent.isEmpty { return true }
        guard case .array(let devices)? = answer["devices"] else { return false }
        for device in devices {
            if device["outcome"]?.stringValue == "not_sent" { return true }
            if case .array(let deliveries)? = device["deliveries"],
                deliveries.contains(where: { ["failed", "expired"].contains($0["state"]?.stringValue ?? "") })
            {
                return true
            }
        }
        return false
    }
}

/// JSON requests to the enrichment service, with its API key and errors that say what to do.
enum ServiceCall {
    static func post(
        server: String, path: String, body: JSONValue, headers: [String: String] = [:], timeout: Int64 = 660
    ) async throws -> (Int, JSONValue) {
        var request = HTTPClientRequest(url: server.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let key = ProcessInfo.processInfo.environment["ENRICH_API_KEY"] {
            request.headers.add(name: "Authorization", value: "Bearer \(key)")
        }
        request.body = .bytes(ByteBuffer(bytes: JSONWriter.bytes(body)))
        let response: HTTPClientResponse
        do { response = try await HTTPClient.shared.execute(request, timeout: .seconds(timeout)) } catch {
            throw ValidationError("cannot reach \(server): \(error). Is the service running?")
        }
        let bytes = try await response.body.collect(upTo: 64 << 20)
        return (Int(response.status.code), (try? JSONParser.parse(Array(bytes.readableBytesView))) ?? .null)
    }

    static func get(server: String, path: String, headers: [String: String] = [:], timeout: Int64 = 660)
        async throws -> (Int, JSONValue)
    {
        var request = HTTPClientRequest(url: server.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let key = ProcessInfo.processInfo.environment["ENRICH_API_KEY"] {
            request.headers.add(name: "Authorization", value: "Bearer \(key)")
        }
        let response: HTTPClientResponse
        do { response = try await HTTPClient.shared.execute(request, timeout: .seconds(timeout)) } catch {
            throw ValidationError("cannot reach \(server): \(error). Is the service running?")
        }
        let bytes = try await response.body.collect(upTo: 64 << 20)
        return (Int(response.status.code), (try? JSONParser.parse(Array(bytes.readableBytesView))) ?? .null)
    }
}
