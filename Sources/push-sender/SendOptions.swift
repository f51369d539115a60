import APNsClient
import APNsCore
import ArgumentParser
import Essentials
import Foundation
import NIOCore

/// Where to send and how to authenticate.
struct ConnectionOptions: ParsableArguments {
    @Flag(help: "Send to api.sandbox.push.apple.com (development builds). The default.") var sandbox = false
    @Flag(help: "Send to api.push.apple.com (TestFlight and App Store builds).") var production = false
    @Option(help: "Send to another APNs-compatible host, e.g. https://127.0.0.1:2197 for the mock.") var host: String?
    @Option(help: "Extra CA certificate (PEM) to trust, e.g. the mock's ca.pem.") var ca: String?
    @Option(help: ".p8 signing key for token authentication.") var key: String?
    @Option(help: "The key's 10-character id (token authentication).") var keyId: String?
    @Option(help: "Your 10-character team id (token authentication).") var teamId: String?
    @Option(help: "Client certificate (PEM) for certificate authentication.") var cert: String?
    @Option(help: "Private key (PEM) of --cert.") var certKey: String?
    @Option(help: "Client certificate and key as PKCS#12 (.p12); password from PUSH_SENDER_P12_PASSWORD.") var p12:
        String?
    @Option(help: "HTTP/2 connections to open.") var connections = 1
    @Option(help: "Event loops (threads) the connections are spread over; 0 is one per core.") var eventLoops = 0
    @Option(help: "Seconds of silence after which a connection sends a PING.") var pingInterval = 60.0
    @Option(help: "Seconds a PING may go unanswered before its connection is closed and its pushes go again.")
    var pingTimeout = 10.0
    @Option(help: "Pushes in flight at once (HTTP/2 streams over all connections).") var concurrency = 64
    @Option(
        help: ArgumentHelp(
            "Seconds to wait for a connection to be ready: TCP, TLS and the server's HTTP/2 SETTINGS (short, so an "
                + "untrusted certificate or a silent server shows quickly)."))
    var connectTimeout = 5.0
    @Option(help: "Attempts per push in all (429 and 5xx are retried with backoff; permanent reasons never).")
    var attempts = 3

    func validate() throws {
        if [sandbox, production, host != nil].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --sandbox, --production or --host")
        }
        if let host, !(host.hasPrefix("https://")) {
            throw ValidationError("--host must be an https:// URL (APNs is HTTP/2 over TLS)")
        }
        if !(1...64).contains(connections) { throw ValidationError("--connections must be 1 to 64") }
        if !(0...64).contains(eventLoops) { throw ValidationError("--event-loops must be 0 (one per core) to 64") }
        if !(pingInterval > 0 && pingInterval <= 3_600) {
            throw ValidationError("--ping-interval must be seconds > 0 and at most 3600")
        }
        if !(pingTimeout > 0 && pingTimeout <= 600) {
            throw ValidationError("--ping-timeout must be seconds > 0 and at most 600")
        }
        if !(1...10_000).contains(concurrency) { throw ValidationError("--concurrency must be 1 to 10000") }
        if !(1...10).contains(attempts) { throw ValidationError("--attempts must be 1 to 10") }
        let tokenAuth = key != nil || keyId != nil || teamId != nil
        let certAuth = cert != nil || certKey != nil || p12 != nil
        if tokenAuth && certAuth {
            throw ValidationError(
                "use token authentication (--key, --key-id, --team-id) or a certificate (--cert/--cert-key or --p12), not both"
            )
        }
        if tokenAuth && (key == nil || keyId == nil || teamId == nil) {
            throw ValidationError("token authentication needs all of --key AuthKey_XXXX.p8, --key-id and --team-id")
        }
        if cert != nil && certKey == nil && p12 == nil { throw ValidationError("--cert needs --cert-key") }
    }

    var environment: APNsEnvironment {
        if let host { return .custom(host) }
        return production ? .production : .sandbox
    }

    var hasCredentials: Bool { key != nil || cert != nil || p12 != nil || Self.environmentKey != nil }

    /// The variables `certs.example/example.env` shows, read when the matching flag is not given.
    static var environmentKey: String? { ProcessInfo.processInfo.environment["APNS_KEY_FILE"].flatMap(nonEmpty) }
    static func nonEmpty(_ text: String) -> String? { text.isEmpty ? nil : text }

    /// The flags, with APNS_KEY_FILE / APNS_KEY_ID / APNS_TEAM_ID / APNS_P12_FILE filling the gaps (only when no
    /// credential flag is given, so flags and environment are never mixed).
    func withEnvironment() -> ConnectionOptions {
        var resolved = self
        let environment = ProcessInfo.processInfo.environment
        guard key == nil, keyId == nil, teamId == nil, cert == nil, certKey == nil, p12 == nil else { return resolved }
        if let file = environment["APNS_KEY_FILE"].flatMap(Self.nonEmpty) {
            resolved.key = file
            resolved.keyId = environment["APNS_KEY_ID"].flatMap(Self.nonEmpty)
            resolved.teamId = environment["APNS_TEAM_ID"].flatMap(Self.nonEmpty)
        } else if let file = environment["APNS_P12_FILE"].flatMap(Self.nonEmpty) {
            resolved.p12 = file
        }
        return resolved
    }

    func credentials() throws -> APNsCredentials {
        if key != nil, keyId == nil || teamId == nil {
            throw ValidationError(
                "token authentication needs all of --key, --key-id and --team-id (or APNS_KEY_FILE, APNS_KEY_ID and "
                    + "APNS_TEAM_ID)")
        }
        do {
            if let key, let keyId, let teamId {
                return try APNsCredentialFiles.token(keyFile: key, keyID: keyId, teamID: teamId)
            }
            if let p12 {
                return try APNsCredentialFiles.pkcs12(
                    file: p12, password: ProcessInfo.processInfo.environment["PUSH_SENDER_P12_PASSWORD"] ?? "",
                    passwordSource: "PUSH_SENDER_P12_PASSWORD")
            }
            if let cert, let certKey { return try APNsCredentialFiles.certificate(certFile: cert, keyFile: certKey) }
        } catch {
            throw ValidationError(error.description)
        }
        throw ValidationError(
            "no credentials: give --key, --key-id and --team-id (token auth) or --cert/--cert-key or --p12, or set "
                + "APNS_KEY_FILE, APNS_KEY_ID and APNS_TEAM_ID (see certs.example/example.env)")
    }

    func senderConfiguration() throws -> APNsSenderConfiguration {
        var trust: String?
        if let ca {
            do { trust = try APNsCredentialFiles.trustRoots(caFile: ca) } catch {
                throw ValidationError("--ca: \(error.description)")
            }
        }
        return APNsSenderConfiguration(
            environment: environment, credentials: try credentials(), additionalTrustRootsPEM: trust,
            connections: connections, eventLoops: eventLoops,
            connectTimeout: .milliseconds(Int64(connectTimeout * 1000)),
            pingInterval: .milliseconds(Int64(pingInterval * 1000)),
            pingTimeout: .milliseconds(Int64(pingTimeout * 1000)),
            retry: RetryPolicy(maxAttempts: attempts))
    }
}

/// The APNs headers.
struct HeaderOptions: ParsableArguments {
    @Option(
        help: """
            The app's bundle id; the push type's suffix (.voip, .complication, ...) is added when missing. Default: \
            APNS_TOPIC, else an .apns file's "Simulator Target Bundle".
            """)
    var topic: String?
    @Option(help: "apns-push-type: \(PushType.allCases.map(\.rawValue).joined(separator: ", ")).") var pushType:
        String = "alert"
    @Option(
        help: "apns-priority: 10 (immediate), 5 (power-considerate; background pushes default to it) or 1.")
    var priority: Int?
    @Option(help: "apns-expiration: epoch seconds, or 0 to deliver once or never.") var expiration: String?
    @Option(help: "apns-collapse-id (at most 64 bytes).") var collapseId: String?
    @Option(help: "apns-id: a UUID for this push (default: APNs assigns one).") var apnsId: String?

    func validate() throws {
        guard let type = PushType(rawValue: pushType) else {
            throw ValidationError(
                "--push-type '\(pushType)' is not one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if let priority, APNsPriority(rawValue: priority) == nil {
            throw ValidationError("--priority must be \(APNsPriority.allowedValues)")
        }
        if let required = type.requiredPriority, let priority, priority != required.rawValue {
            throw ValidationError("\(type.rawValue) pushes need --priority \(required)")
        }
        if type == .liveactivity, priority == APNsPriority.low.rawValue {
            // ActivityKit: a Live Activity push has priority 10 or 5; APNs answers 400 BadPriority to 1.
            throw ValidationError("liveactivity pushes need --priority 10 or 5 (APNs refuses 1 with BadPriority)")
        }
        if let topic, let problem = APNsValidator.topicProblem(type.topic(forBundle: topic)) {
            throw ValidationError("--topic \(problem)")
        }
        if let expiration, let problem = APNsValidator.expirationProblem(expiration) {
            throw ValidationError("--expiration \(problem)")
        }
        if let collapseId, let problem = APNsValidator.collapseIDProblem(collapseId) {
            throw ValidationError("--collapse-id \(problem)")
        }
        if let apnsId, !APNsValidator.isValidAPNsID(apnsId) {
            throw ValidationError("--apns-id must be a UUID such as 123e4567-e89b-12d3-a456-426614174000")
        }
    }

    // The options as typed values (`validate()` has refused any other).

    /// The push type sent.
    var type: PushType { PushType(rawValue: pushType) ?? .alert }

    /// The priority sent: background pushes get 5 when none is given (APNs reads a missing header as 10, which it
    /// refuses for background pushes).
    var effectivePriority: APNsPriority? {
        priority.flatMap(APNsPriority.init(rawValue:)) ?? type.requiredPriority
    }

    /// The expiration sent.
    var typedExpiration: APNsExpiration? { expiration.flatMap(APNsExpiration.init(header:)) }

    /// The bundle id: --topic, else APNS_TOPIC, else the payload file's "Simulator Target Bundle".
    func bundle(simulatorTarget: String?) throws -> String {
        if let topic { return topic }
        if let topic = ProcessInfo.processInfo.environment["APNS_TOPIC"], !topic.isEmpty { return topic }
        if let simulatorTarget { return simulatorTarget }
        throw ValidationError("give --topic with the app's bundle id (or set APNS_TOPIC)")
    }
}

/// Which device tokens to send to.
struct TokenOptions: ParsableArguments {
    @Option(name: .customLong("token"), help: "A device token (hex, 64 to 200 digits); repeat for several.") var tokens:
        [String] = []
    @Option(
        help: """
            A file with one device token per line, or - for standard input; a line TOKEN {json} sends that payload \
            to that token (# starts a comment line).
            """)
    var tokensFile: String?

    /// One token with, when its line carried one, its own payload.
    struct Entry {
        var token: String
        var payload: JSONValue?
        /// Why the line's payload cannot be used (the token is then refused locally).
        var problem: String?
    }

    func entries() throws -> [Entry] {
        var result = tokens.map { Entry(token: $0) }
        if let tokensFile {
            let bytes: Data
            if tokensFile == "-" {
                bytes = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                // Read as bytes: one ill-formed line (a stray byte) must fail that token only, not the whole run.
                guard let contents = FileManager.default.contents(atPath: tokensFile) else {
                    throw ValidationError("cannot read --tokens-file '\(tokensFile)'")
                }
                bytes = contents
            }
            result += Self.parse([UInt8](bytes)[...])
        }
        if result.isEmpty { throw ValidationError("give at least one --token HEX or a --tokens-file") }
        return result
    }

    /// Every entry in `bytes`, one per non-blank, non-comment line. Lines are slices of one byte array: slicing
    /// Data per line cost more than sending, at 100,000 tokens.
    static func parse(_ bytes: ArraySlice<UInt8>) -> [Entry] {
        var result: [Entry] = []
        result.reserveCapacity(bytes.count / 65)
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            if let entry = entry(bytes[start..<end]) { result.append(entry) }
            start = end + 1
        }
        return result
    }

    private static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D }

    /// `TOKEN`, `TOKEN # comment` or `TOKEN {json}`; nil for a blank or comment line.
    static func entry(_ line: ArraySlice<UInt8>) -> Entry? {
        var rest = line.drop(while: isBlank)
        guard let first = rest.first, first != UInt8(ascii: "#") else { return nil }
        let token = rest.prefix { !isBlank($0) && $0 != UInt8(ascii: "#") && $0 != UInt8(ascii: "{") }
        rest = rest.dropFirst(token.count).drop(while: isBlank)
        var entry = Entry(token: String(decoding: token, as: UTF8.self))
        while let last = rest.last, isBlank(last) { rest = rest.dropLast() }
        if let brace = rest.first, brace == UInt8(ascii: "{") {
            do {
                let value = try JSONParser.parse(Array(rest))
                if case .object = value {
                    entry.payload = value
                } else {
                    entry.problem = "the payload must be a JSON object"
                }
            } catch {
                entry.problem = "the payload on this line is not valid JSON: \(error.description)"
            }
        } else if let next = rest.first, next != UInt8(ascii: "#") {
            entry.problem = "after the token a line may hold only a {json} payload or a # comment"
        }
        return entry
    }
}
