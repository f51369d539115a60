import APNsCore
import ArgumentParser
import AsyncHTTPClient
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import FCMCore
import Foundation
import NIOCore
import NIOHTTP1

/// `push-sender simulate`: play the phone for one device.
struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the Notification Service Extension flow for a device and show the notification.",
        discussion: """
            With --server, asks the running service (POST /v1/enrich; ENRICH_API_KEY is sent as the bearer token). \
            Without it, runs in-process with the service's own engine on its SQLite file: every ENRICH_* setting \
            the service reads applies (template, staleness window, places, map), with --db and --mode over \
            ENRICH_DB and ENRICH_MODE; the places search reads the database directly, so nothing is loaded first. \
            --lat and --lng give a fix for this run only (nothing is stored); with them, --device may be left out, \
            and without --db or --server and no service database where ENRICH_DB points, the built-in sample POIs \
            serve, as they do for a fresh service: `push-sender simulate payloads/location.json --lat 48.8584 \
            --lng 2.2945` works in any folder.

            Exit status, as `check`: 0 when the payload was fresh, 1 stale, 2 no usable timestamp, 3 not a valid \
            payload.
            """)

    @Argument(help: "The payload file (or - for standard input).") var file: String
    @Option(help: "The device whose last fix is used (optional with --lat and --lng).") var device: String?
    @Option(help: "Base URL of a running enrichment service, e.g. http://127.0.0.1:8080.") var server: String?
    @Option(help: ArgumentHelp("In-process: " + ServiceConfiguration.settings.help(for: "db"))) var db: String?
    @Option(help: "Evaluate as of this epoch time (default: now).") var now: Double?
    @Option(help: ArgumentHelp(ServiceConfiguration.settings.help(for: "mode"))) var mode: BodyMode?
    @Option(help: "A fix for this run only: latitude (with --lng).") var lat: Double?
    @Option(help: "A fix for this run only: longitude (with --lat).") var lng: Double?
    @Option(help: "The horizontal accuracy of the --lat/--lng fix, metres.") var accuracy: Double?
    @Flag(help: "Set aps.timestamp to now before simulating.") var stampNow = false
    @Flag(help: "Print the service's full result as JSON (with --android: the FCM message).") var json = false
    @Flag(help: "Also show what an Android device would get: its FCM HTTP v1 message (docs/ANDROID.md).")
    var android = false
    @Option(help: "Also write the notification as an HTML page (the service's /preview): text and a local map.")
    var html: String?

    /// The device simulated: `--device`, or a name for the `--lat`/`--lng` fix alone.
    var deviceId: String { device ?? "simulated-device" }

    func validate() throws {
        if device == nil, lat == nil {
            throw ValidationError(
                "give --device (the device whose last fix is used), or a fix with --lat and --lng (no device needed)")
        }
        if let device, let problem = DeviceID.problem(with: device) { throw ValidationError("--device: \(problem)") }
        if let server, !(server.hasPrefix("http://") || server.hasPrefix("https://")) {
            throw ValidationError("--server must be an http(s) URL such as http://127.0.0.1:8080")
        }
        if (lat == nil) != (lng == nil) { throw ValidationError("give --lat and --lng together") }
        if let lat, !(-90...90).contains(lat) { throw ValidationError("--lat must be in [-90, 90]") }
        if let lng, !(-180...180).contains(lng) { throw ValidationError("--lng must be in [-180, 180]") }
        if let accuracy, !(accuracy >= 0 && accuracy.isFinite) {
            throw ValidationError("--accuracy must be metres >= 0")
        }
        if accuracy != nil, lat == nil { throw ValidationError("--accuracy goes with --lat and --lng") }
    }

    /// The exit status of a result, as `check` gives it for the verdict.
    static func exitStatus(_ view: PreviewPage.View) -> Int32 {
        switch view.stalenessState {
        case "stale": 1
        case "no_timestamp": 2
        default: 0
        }
    }

    func run() async throws {
        let instant = now ?? Date().timeIntervalSince1970
        let payloadValue: JSONValue
        // Placeholders take the real time (when the push is made); --now is when the phone receives it.
        do {
            payloadValue = try PayloadLoader.load(
                file: file, inline: nil, now: Int64(Date().timeIntervalSince1970), stampNow: stampNow)
        } catch {
            printError("\(error)")
            throw ExitCode(3)
        }
        // The typed result in process; over HTTP, the API's JSON (its view is read from that). Both print and
        // render from the view; --json prints the answer's bytes as they are.
        let answer: [UInt8]
        let view: PreviewPage.View
        if server != nil {
            let result = try await viaServer(payloadValue, at: instant)
            answer = JSONWriter.bytes(result)
            view = PreviewPage.View(json: result)
        } else {
            let typed = try await inProcess(payloadValue, at: instant)
            answer = typed.encodedJSON()
            view = PreviewPage.View(typed)
        }
        if android {
            let message = try Self.androidMessage(answer, device: deviceId)
            if json {
                print(String(decoding: message.requestBody(), as: UTF8.self))
            } else {
                print(PhoneView.render(view))
                print(Self.androidView(message))
            }
        } else if json {
            print(String(decoding: answer, as: UTF8.self))
        } else {
            print(PhoneView.render(view))
        }
        if let html {
            let page = PreviewPage.render(
                view,
                context: PreviewPage.Context(
                    deviceId: deviceId, payloadText: String(decoding: JSONWriter.bytes(payloadValue), as: UTF8.self)))
            do { try Data(page.utf8).write(to: URL(fileURLWithPath: html)) } catch {
                throw ValidationError("cannot write '\(html)': \(error.localizedDescription)")
            }
            if !json { print("preview written to \(html)") }
        }
        let status = Self.exitStatus(view)
        if status != 0 { throw ExitCode(status) }
    }

    func viaServer(_ payload: JSONValue, at instant: Double) async throws -> JSONValue {
        var body: [String: JSONValue] = ["device_id": .string(deviceId), "payload": payload, "at": .double(instant)]
        if let mode { body["mode"] = .string(mode.rawValue) }
        if let lat, let lng {
            var fix: [String: JSONValue] = ["latitude": .double(lat), "longitude": .double(lng)]
            if let accuracy { fix["horizontal_accuracy"] = .double(accuracy) }
            body["fix"] = .object(fix)
        }
        let (status, value) = try await ServiceCall.post(
            server: server!, path: "/v1/enrich", body: .object(body), timeout: 30)
        guard status == 200 else {
            let message = value["error"]?["message"]?.stringValue ?? "HTTP \(status)"
            if value["error"]?["reason"]?.stringValue == "invalid_payload" || status == 413 {
                printError(message)
                throw ExitCode(3)
            }
            throw ValidationError("the service refused the request: \(message)")
        }
        return value
    }

    /// The service's configuration as this process's environment gives it, with --db and --mode over it.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> ServiceConfiguration
    {
        do { return try .resolve(environment: environment, options: ["db": db, "mode": mode?.rawValue]) } catch {
            throw ValidationError(error.description)
        }
    }

    func inProcess(_ payloadValue: JSONValue, at instant: Double) async throws -> EnrichmentResult {
        let environment = ProcessInfo.processInfo.environment
        var configuration = try configuration(environment: environment)
        // A simulation reads the service's data; it never seeds the service's database with sample POIs.
        configuration.loadSamplePOIs = false
        var scope = EnrichmentRuntime.Scope.query
        var scratch: URL?
        defer { if let scratch { try? FileManager.default.removeItem(at: scratch) } }
        if configuration.databaseURL == nil, !FileManager.default.fileExists(atPath: configuration.databasePath) {
            // No service here. With a fix on the command line nothing of the service's is needed: a throwaway
            // database with the built-in sample POIs serves, as it does for a fresh service. A --db or ENRICH_DB
            // that names a missing file is a mistake, said as such.
            guard lat != nil, db == nil, environment["ENRICH_DB"] == nil else {
                throw ValidationError(
                    "no database at '\(configuration.databasePath)': start the service once (swift run "
                        + "enrichment-server), pass --db or --server, or give a fix with --lat and --lng")
            }
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("push-sender-simulate-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            scratch = directory
            configuration.databasePath = directory.appendingPathComponent("samples.sqlite").path
            configuration.loadSamplePOIs = true
            scope = .full
            if !json {
                printError("no service database here: using the built-in sample POIs (--db or --server for yours)")
            }
        }
        let payload: NotificationPayload
        do { payload = try NotificationPayload(json: payloadValue) } catch {
            printError(error.description)
            throw ExitCode(3)
        }
        // The query scope searches the POI store directly: nothing is loaded that the service keeps in memory.
        let runtime = try await EnrichmentRuntime.open(
            configuration, scope: scope, clock: FixedWallClock(epochSeconds: instant))
        let fix = lat.flatMap { lat in
            lng.map { lng in
                LocationFix(
                    deviceId: deviceId, coordinate: Coordinate(latitude: lat, longitude: lng), fixTime: instant,
                    horizontalAccuracy: accuracy, context: "simulate", receivedAt: instant)
            }
        }
        do {
            return try await runtime.enricher.enrich(deviceId: deviceId, payload: payload, fix: fix)
        } catch let error as PayloadError {
            printError(error.description)
            throw ExitCode(3)
        }
    }
}

/// The notification as a phone would show it, plus what happened.
enum PhoneView {
    static func render(_ view: PreviewPage.View) -> String {
        var lines: [String] = []
        if let title = view.title { lines.append(title) }
        if let subtitle = view.subtitle { lines.append(subtitle) }
        lines.append(contentsOf: view.body.components(separatedBy: "\n"))
        let width = min(72, max(30, lines.map(\.count).max() ?? 0))
        var out = ["┌" + String(repeating: "─", count: width + 2) + "┐"]
        for line in lines {
            let text = line.count > width ? String(line.prefix(width - 1)) + "…" : line
            out.append("│ " + text.padding(toLength: width, withPad: " ", startingAt: 0) + " │")
        }
        if view.attachmentURL != nil {
            // The phone would download and attach the map; here only its URL is known (see --html for a picture).
            out.append(
                "│ " + "[map: attachment-url below]".padding(toLength: width, withPad: " ", startingAt: 0) + " │")
        }
        out.append("└" + String(repeating: "─", count: width + 2) + "┘")
        out.append("outcome: \(view.outcome) (\(view.rule))")
        if let degraded = view.degraded { out.append("degraded: \(degraded)") }
        for hint in view.hints { out.append("hint: \(hint)") }
        if let state = view.stalenessState {
            out.append("staleness: \(state)" + (view.ageSeconds.map { " (age \($0) s)" } ?? ""))
        }
        if let first = view.places.first {
            out.append("nearest: \(first.name) at \(String(format: "%.1f", first.distance)) m")
        }
        if let attachment = view.attachmentURL { out.append("attachment: \(attachment)") }
        return out.joined(separator: "\n")
    }
}

enum JSONWriterText {
    static func text(_ value: JSONValue) -> String {
        switch value {
        case .double(let d): String(format: "%.1f", d)
        default: String(decoding: JSONWriter.bytes(value), as: UTF8.self)
        }
    }
}

extension Simulate {
    /// The Android twin of the result's payload, as the service would send it to an FCM registration.
    static func androidMessage(_ answer: [UInt8], device: String) throws -> FCMMessage {
        guard case .object(var members)? = (try? JSONParser.parse(answer))?["payload"] else {
            throw ValidationError("the result has no payload to turn into an FCM message")
        }
        let image = members.removeValue(forKey: Enricher.attachmentKey)?.stringValue
        do {
            return try FCMMessage.fromAPNs(
                payload: .object(members), token: "<\(device)'s FCM registration token>",
                options: FCMDeliveryOptions(image: image), now: Int64(Date().timeIntervalSince1970))
        } catch {
            printError("an Android device would get nothing: \(error.description)")
            throw ExitCode(3)
        }
    }

    /// What the Android notification shows, then the message as sent.
    static func androidView(_ message: FCMMessage) -> String {
        var lines = ["", "Android (FCM HTTP v1):"]
        if let notification = message.notification {
            if let title = notification.title { lines.append("  title: \(title)") }
            if let body = notification.body {
                lines.append("  body:  \(body.replacingOccurrences(of: "\n", with: "\n         "))")
            }
            if let image = notification.image { lines.append("  image: \(image)") }
        } else {
            lines.append("  a data-only message: nothing is shown until the app builds a notification")
        }
        for (key, value) in message.data.sorted(by: { $0.key < $1.key }) { lines.append("  data.\(key) = \(value)") }
        lines.append("  " + String(decoding: message.requestBody(), as: UTF8.self))
        return lines.joined(separator: "\n")
    }
}
