import EnrichmentCore
import Essentials
import Foundation
import MockAPNs
import Synchronization
import TestSupport
import Testing

/// The real `enrichment-server` at `--log-level trace`, its standard output and error written to files.
struct LoggedServer {
    let process: Process
    let port: Int
    let stdout: URL
    let stderr: URL

    /// Starts `serve --port 0 --log-level trace` with `environment` added, and waits for its "listening" line.
    static func start(_ arguments: [String], environment: [String: String], in directory: URL) throws -> LoggedServer {
        let stdout = directory.appendingPathComponent("stdout-\(UUID().uuidString).log")
        let stderr = directory.appendingPathComponent("stderr-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: stdout.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
        let process = Process()
        process.executableURL = try ServerProcess.executableURL()
        process.arguments = ["serve", "--port", "0", "--log-level", "trace"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardOutput = try FileHandle(forWritingTo: stdout)
        process.standardError = try FileHandle(forWritingTo: stderr)
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, process.isRunning {
            let seen = (try? String(contentsOf: stderr, encoding: .utf8)) ?? ""
            // The "listening" line (other lines may name other local servers: the mock, the webhooks).
            for line in seen.split(separator: "\n") where line.contains("listening") {
                if let range = line.range(of: #"http://127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                    return LoggedServer(
                        process: process, port: Int(line[range].split(separator: ":").last!)!, stdout: stdout,
                        stderr: stderr)
                }
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        process.terminate()
        let seen = (try? String(contentsOf: stderr, encoding: .utf8)) ?? ""
        throw TestEnvironmentError("the server did not start: \(seen.suffix(3000))")
    }

    /// SIGTERM, then everything the process wrote.
    func stop() -> String {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        let out = (try? String(contentsOf: stdout, encoding: .utf8)) ?? ""
        let err = (try? String(contentsOf: stderr, encoding: .utf8)) ?? ""
        return out + "\n" + err
    }
}

/// A failed start: the exit status and everything written.
func failedStart(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = try ServerProcess.executableURL()
    process.arguments = ["serve", "--port", "0", "--log-level", "trace"] + arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite("No secret in any output, at any log level", .serialized)
struct SecretRedactionTests {
    // Distinct canaries, one per secret setting. The signing secret must be URL-safe base64 to be accepted.
    static let apiKey = "canary-api-key-Q1w2E3"
    static let woosmapKey = "canary-woosmap-key-R4t5"
    static let mapKey = "canary-map-key-Y6u7"
    static let signingSecret = "Y2FuYXJ5LXNpZ25pbmctc2VjcmV0LUk4bzk="
    static let p12Password = "canary-p12-password-A2s3"
    static let databasePassword = "canary-db-password-D4f5"
    static let callbackSecret = "canary-callback-secret-G6h7"

    /// The base64 lines of a PEM's body (the key material), each long enough to be unmistakable.
    static func pemBodyLines(_ pem: String) -> [String] {
        pem.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 16 }
    }

    static func leaks(_ text: String, _ canaries: [String]) -> [String] {
        canaries.filter { text.contains($0) }
    }

    @Test(
        "SQLite, token auth: API, places, map and signing keys and the .p8 never appear in logs, metrics, errors or webhooks"
    )
    func tokenAuthentication() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redact-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (keyFile, caFile) = try writeMockCredentials(into: directory)
        let keyLines = Self.pemBodyLines(try String(contentsOfFile: keyFile, encoding: .utf8))
        try #require(!keyLines.isEmpty)
        let canaries = [Self.apiKey, Self.woosmapKey, Self.mapKey, Self.signingSecret, Self.callbackSecret] + keyLines
        let places = FakePlacesAPI()
        let webhook = RecordingWebhook()
        try await places.run { placesURL in
            try await webhook.run { hookURL in
                try await withMock { mockURL, mock in
                    let server = try LoggedServer.start(
                        ["--db", directory.appendingPathComponent("db.sqlite").path, "--sample-pois", "false"],
                        environment: [
                            "ENRICH_API_KEY": Self.apiKey, "ENRICH_PLACES": "woosmap",
                            "ENRICH_WOOSMAP_URL": placesURL + "/ok", "ENRICH_WOOSMAP_KEY": Self.woosmapKey,
                            "ENRICH_MAP_KEY": Self.mapKey, "ENRICH_MAP_SIGNING_SECRET": Self.signingSecret,
                            "ENRICH_APNS_KEY_FILE": keyFile, "ENRICH_APNS_KEY_ID": "KEYID12345",
                            "ENRICH_APNS_TEAM_ID": "TEAMID6789", "ENRICH_APNS_CA": caFile,
                            "ENRICH_APNS_SANDBOX_URL": mockURL, "ENRICH_APNS_PRODUCTION_URL": mockURL,
                            "ENRICH_APNS_RETRY_DELAY": "0.05", "ENRICH_FEEDBACK_URL": hookURL + "/hook",
                            "ENRICH_LOCATION_WEBHOOK_URL": hookURL + "/hook",
                            "ENRICH_PUSH_CALLBACK_HOSTS": "127.0.0.1",
                            "ENRICH_PUSH_CALLBACK_SECRET": Self.callbackSecret,
                        ], in: directory)
                    var bodies: [String] = []
                    do {
                        let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
                        let auth = ["Authorization": "Bearer \(Self.apiKey)"]
                        let now = Int(Date().timeIntervalSince1970)
                        // Refused: no key, a wrong key, a bad body, an unknown device, a bad push.
                        bodies.append(try await client.get("/v1/devices/d1/location").text)
                        bodies.append(
                            try await client.get("/v1/devices/d1/location", headers: ["Authorization": "Bearer x"]).text
                        )
                        bodies.append(try await client.post("/v1/enrich", json: "{", headers: auth).text)
                        bodies.append(try await client.get("/v1/devices/nobody/location", headers: auth).text)
                        bodies.append(
                            try await client.post(
                                "/v1/push", json: #"{"device_ids":["d1"],"payload":{"aps":{}},"topic":"a b"}"#,
                                headers: auth
                            ).text)
                        // Accepted: a region, fixes (entering it), an enrichment, POIs, the SDK search, tokens, a push.
                        _ = try await client.post(
                            "/v1/regions", json: #"{"id":"r","latitude":43.6,"longitude":3.88,"radius":500}"#,
                            headers: auth)
                        let fixes = try await client.post(
                            "/v1/devices/d1/locations",
                            json:
                                #"{"locations":[{"latitude":43.7,"longitude":3.88,"utc_timestamp":\#(now - 20)},{"latitude":43.6,"longitude":3.88,"utc_timestamp":\#(now - 10)}]}"#,
                            headers: auth)
                        #expect(fixes.status == 200)
                        let enriched = try await client.post(
                            "/v1/enrich",
                            json:
                                #"{"device_id":"d1","payload":{"aps":{"alert":{"title":"t","body":"b"},"mutable-content":1,"category":"location","timestamp":\#(now)}}}"#,
                            headers: auth)
                        #expect(enriched.status == 200)
                        // The canaries are in use: the map URL carries its key (by design) and a signature, and the
                        // places API was asked with its key.
                        #expect(enriched.json?["static_map_url"]?.stringValue?.contains("key=\(Self.mapKey)") == true)
                        #expect(enriched.json?["static_map_url"]?.stringValue?.contains("&signature=") == true)
                        #expect(places.queries.withLock { $0.contains { $0.contains(Self.woosmapKey) } })
                        _ = try await client.post(
                            "/v1/pois",
                            json:
                                #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"store_id":"s1","name":"S"},"geometry":{"type":"Point","coordinates":[3.88,43.6]}}]}"#,
                            headers: auth)
                        bodies.append(try await client.get("/stores/search/?lat=43.6&lng=3.88&private_key=wrong").text)
                        _ = try await client.get("/stores/search/?lat=43.6&lng=3.88&private_key=\(Self.apiKey)")
                        mock.script(
                            FailureScript(status: 400, reason: "BadDeviceToken"),
                            for: String(repeating: "ab", count: 32))
                        _ = try await client.put(
                            "/v1/devices/d1/apns-tokens/\(String(repeating: "ab", count: 32))",
                            json: #"{"topic":"com.example.app","environment":"sandbox"}"#, headers: auth)
                        let push = try await client.post(
                            "/v1/push",
                            json:
                                #"{"device_ids":["d1"],"wait":true,"callback_url":"\#(hookURL)/hook","payload":{"aps":{"alert":{"title":"t","body":"b"},"mutable-content":1,"category":"location","timestamp":\#(now)}}}"#,
                            headers: auth)
                        bodies.append(push.text)
                        if let pushId = push.json?["push_id"]?.stringValue {
                            bodies.append(try await client.get("/v1/push/\(pushId)", headers: auth).text)
                        }
                        // The preview: the sign-in page, a wrong key, the right one, the page with the cookie.
                        bodies.append(try await client.get("/preview").text)
                        bodies.append(try await client.postForm("/preview/login", "key=wrong").text)
                        let signIn = try await client.postForm("/preview/login", "key=\(Self.apiKey)")
                        #expect(signIn.status == 303)
                        let cookie = try #require(signIn.headers["set-cookie"]?.split(separator: ";").first)
                        #expect(!cookie.contains(Self.apiKey), "the cookie is not the key")
                        let preview = try await client.get("/preview?device_id=d1", headers: ["Cookie": String(cookie)])
                        #expect(preview.status == 200)
                        bodies.append(try await client.get("/metrics").text)
                        // Wait for the feedback (BadDeviceToken), location (region enter) and push callback webhooks.
                        let deadline = Date().addingTimeInterval(10)
                        while webhook.bodies.withLock({ $0.count }) < 3, Date() < deadline {
                            try await Task.sleep(for: .milliseconds(50))
                        }
                    } catch {
                        _ = server.stop()
                        throw error
                    }
                    let output = server.stop()
                    let hooks = webhook.bodies.withLock { $0.map { String(decoding: $0.encodedData(), as: UTF8.self) } }
                    #expect(hooks.count >= 3, "the three webhooks were called: \(hooks)")
                    // The callback was signed with the secret (the signature, not the secret, travels).
                    #expect(webhook.raw.withLock { $0.contains { $0.signature?.hasPrefix("sha256=") == true } })
                    // The run logged at trace (the check is not vacuous) ...
                    #expect(output.contains("configuration"))
                    #expect(output.contains("trace") || output.contains("debug"), "\(output.prefix(2000))")
                    // ... and nothing anywhere holds a canary.
                    #expect(Self.leaks(output, canaries).isEmpty, "in the logs: \(Self.leaks(output, canaries))")
                    for body in bodies {
                        #expect(Self.leaks(body, canaries).isEmpty, "in an answer: \(body.prefix(500))")
                    }
                    for hook in hooks { #expect(Self.leaks(hook, canaries).isEmpty, "in a webhook: \(hook)") }
                }
            }
        }
    }

    @Test("PostgreSQL and a .p12: the database password and the .p12 password never appear")
    func databaseAndCertificate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redact-pg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let p12 = try PKCS12File.make(password: Self.p12Password, in: directory)
        // The throwaway cluster trusts loopback: any password is accepted, and this one must not be shown.
        let plain = try await PostgresTestDatabase.makeURL()
        let url = plain.replacingOccurrences(
            of: "postgres://enrich@", with: "postgres://enrich:\(Self.databasePassword)@")
        try #require(url != plain)
        let canaries = [Self.apiKey, Self.databasePassword, Self.p12Password]
        try await withMock(clientCA: true) { mockURL, _ in
            let caFile = directory.appendingPathComponent("ca.pem").path
            try authority.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
            let server = try LoggedServer.start(
                [],
                environment: [
                    "ENRICH_DATABASE_URL": url, "ENRICH_API_KEY": Self.apiKey, "ENRICH_APNS_P12": p12,
                    "ENRICH_APNS_P12_PASSWORD": Self.p12Password, "ENRICH_APNS_CA": caFile,
                    "ENRICH_APNS_SANDBOX_URL": mockURL, "ENRICH_APNS_PRODUCTION_URL": mockURL,
                ], in: directory)
            var bodies: [String] = []
            do {
                let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
                let auth = ["Authorization": "Bearer \(Self.apiKey)"]
                let now = Int(Date().timeIntervalSince1970)
                bodies.append(try await client.get("/v1/devices/d1/location").text)
                bodies.append(try await client.post("/v1/devices/d1/locations", json: "[]", headers: auth).text)
                let fixes = try await client.post(
                    "/v1/devices/d1/locations",
                    json: #"{"locations":[{"latitude":43.6,"longitude":3.88,"utc_timestamp":\#(now - 10)}]}"#,
                    headers: auth)
                #expect(fixes.status == 200)
                _ = try await client.put(
                    "/v1/devices/d1/apns-tokens/\(token64)",
                    json: #"{"topic":"com.example.app","environment":"sandbox"}"#, headers: auth)
                let push = try await client.post(
                    "/v1/push",
                    json: #"{"device_ids":["d1"],"wait":true,"payload":{"aps":{"alert":{"title":"t","body":"b"}}}}"#,
                    headers: auth)
                // The .p12 (and its password) authenticated against a mock that requires a client certificate.
                #expect(push.json?["counts"]?["delivered"] == .int(1), "\(push.text)")
                bodies.append(push.text)
                bodies.append(try await client.get("/metrics").text)
            } catch {
                _ = server.stop()
                throw error
            }
            let output = server.stop()
            #expect(output.contains("PostgreSQL"), "the run used PostgreSQL: \(output.prefix(2000))")
            #expect(Self.leaks(output, canaries).isEmpty, "in the logs: \(Self.leaks(output, canaries))")
            for body in bodies { #expect(Self.leaks(body, canaries).isEmpty, "in an answer: \(body.prefix(500))") }
        }
    }

    @Test("a start-up refused for a bad secret names the setting and never echoes the value")
    func refusedStartups() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redact-bad-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let db = ["--db", directory.appendingPathComponent("db.sqlite").path]
        let badKeyFile = directory.appendingPathComponent("AuthKey_BAD.p8").path
        try "-----BEGIN PRIVATE KEY-----\ncanary-p8-contents-G6h7\n-----END PRIVATE KEY-----\n".write(
            toFile: badKeyFile, atomically: true, encoding: .utf8)
        let cases: [(environment: [String: String], canary: String, names: String)] = [
            (["ENRICH_API_KEY": "canary-newline-J8k9\n"], "canary-newline-J8k9", "ENRICH_API_KEY"),
            (["ENRICH_API_KEY": "canary-tab-\tL0z1"], "canary-tab-", "ENRICH_API_KEY"),
            (["ENRICH_MAP_SIGNING_SECRET": "canary-not-base64-X2c3!"], "canary-not-base64-X2c3", "signing secret"),
            (
                ["ENRICH_APNS_KEY_FILE": badKeyFile, "ENRICH_APNS_KEY_ID": "KEYID12345", "ENRICH_APNS_TEAM_ID": "T"],
                "canary-p8-contents-G6h7", "AuthKey_BAD.p8"
            ),
            (
                ["ENRICH_DATABASE_URL": "postgres://u:canary-db-V4b5@/nohost"], "canary-db-V4b5",
                "ENRICH_DATABASE_URL"
            ),
        ]
        for (environment, canary, names) in cases {
            let (status, output) = try failedStart(db, environment: environment)
            #expect(status != 0, "\(environment.keys.sorted()) started")
            // The error and the start-up's log lines share the output, and a log line (one write) can land inside
            // the error's text: the log lines are taken out before looking for the name.
            let errorText = output.replacing(
                #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} [a-z]+ enrichment-server:[^\n]*\n/#, with: "")
            #expect(errorText.contains(names), "\(output)")
            #expect(!output.contains(canary), "\(output)")
        }
    }
}

/// A .p12 made from the mock's throwaway client certificate with the system's openssl, as Keychain Access exports.
enum PKCS12File {
    static func make(password: String, in directory: URL) throws -> String {
        try Data(authority.clientCertificatePEM.utf8).write(to: directory.appendingPathComponent("client.pem"))
        try Data(authority.clientKeyPEM.utf8).write(to: directory.appendingPathComponent("client-key.pem"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "openssl", "pkcs12", "-export", "-in", "client.pem", "-inkey", "client-key.pem", "-out", "client.p12",
            "-passout", "env:P12_PASSWORD",
        ]
        process.environment = ProcessInfo.processInfo.environment.merging(["P12_PASSWORD": password]) { _, new in new }
        process.currentDirectoryURL = directory
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TestEnvironmentError("openssl pkcs12 -export failed") }
        return directory.appendingPathComponent("client.p12").path
    }
}
