import ArgumentParser
import Crypto
import EnrichmentCore
import Essentials
import Foundation
import Logging
import MockAPNs

/// `push-sender mock-apns`: a local APNs-compatible server over HTTP/2 + TLS.
struct MockAPNsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-apns",
        abstract: "Run a local APNs-compatible server (HTTP/2 + TLS) that validates like Apple and scripts failures.",
        discussion: """
            Without --cert, a throwaway CA and server certificate for localhost/127.0.0.1 are made at start and written \
            to --certs-out (ca.pem is what senders trust with --ca); a still-valid one already there is reused, so a \
            second mock does not break the senders of the first. Failures per device token come from --scripts \
            (JSON: {"<token>": {"status": 410, "reason": "Unregistered", "times": 1, "delay_ms": 0}}) or from the \
            control endpoints: GET/POST/DELETE /control/scripts (POST takes the --scripts shape or one \
            {"token": ..., "status": ...}), GET/DELETE /control/received. Connection behaviour (GOAWAY, abrupt \
            closes, stream limits, silence) comes from the flags below or GET/POST/DELETE /control/behaviour \
            ({"goaway_after": 1000, "goaway_held_back": 10, "close_after": 500, "max_concurrent_streams": 100, \
            "stream_limits": [[200, 1], [400, 100]], "silent_after": 50}), for connections opened afterwards; \
            GET /control/connections counts what the mock did.

            Several teams: --teams names a JSON file {"teams": [{"team_id": "TEAM123456", "keys": {"KEY1234567": \
            "AuthKey_KEY1234567.p8"}, "bundle_ids": ["com.example.app"]}]} (a key file is a .p8 or its public PEM; \
            paths are relative to the file). A token is verified with the key its kid names, its iss must be that \
            key's team, and it pushes only to the team's apps. Broadcast channels (iOS 18) are served on the same \
            port: /1/apps/<bundle id>/channels, /all-channels and /4/broadcasts/apps/<bundle id>; GET/DELETE \
            /control/channels and GET /control/broadcasts show them.
            """)

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free one).") var port = 2197
    @Option(help: "Server certificate chain (PEM); default: made at start.") var cert: String?
    @Option(help: "Private key (PEM) of --cert.") var certKey: String?
    @Option(help: "Where generated certificates are written.") var certsOut = "data/mock-apns"
    @Option(help: "Public key (PEM) that provider tokens must verify with.") var authKeyPub: String?
    @Option(help: "A .p8 key whose public half verifies provider tokens (alternative to --auth-key-pub).") var authKey:
        String?
    @Option(help: "Expected kid in provider tokens.") var keyId: String?
    @Option(help: "Expected iss (team id) in provider tokens.") var teamId: String?
    @Option(help: "Require client certificates signed by this CA (PEM) instead of provider tokens.") var clientCa:
        String?
    @Option(help: "Failure scripts per device token (JSON file).") var scripts: String?
    @Option(help: "Several teams' keys and apps (JSON file; see above).") var teams: String?
    @Option(help: "A bundle id whose Broadcast capability is off (FeatureNotEnabled); repeatable.")
    var broadcastDisabled: [String] = []
    @Option(help: "trace, debug, info, notice, warning, error.") var logLevel = "info"
    @Option(help: "Pushes kept in the record (GET /control/received); the oldest go first.") var recordCapacity =
        100_000
    @Option(help: "Per connection: after N pushes send GOAWAY, answer what was processed, then close (like nginx).")
    var goawayAfter: Int?
    @Option(help: "With --goaway-after: hold the last N pushes before it unprocessed, below the GOAWAY's last stream.")
    var goawayHeldBack: Int?
    @Option(help: "Per connection: after N pushes are answered, close the connection without GOAWAY.")
    var closeAfter: Int?
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS sent to each connection (APNs: 1000).")
    var maxConcurrentStreams: Int?
    @Option(help: "AFTER:LIMIT: after AFTER pushes on a connection, lower or raise its stream limit (repeatable).")
    var streamLimit: [String] = []
    @Option(help: "Per connection: after N pushes are answered, stop reading and answering (PINGs go unanswered).")
    var silentAfter: Int?

    /// The connection behaviour the flags ask for, checked by the same rules as POST /control/behaviour.
    func behaviour() throws -> ConnectionBehaviour {
        var members: [String: JSONValue] = [:]
        if let goawayAfter { members["goaway_after"] = .int(Int64(goawayAfter)) }
        if let goawayHeldBack { members["goaway_held_back"] = .int(Int64(goawayHeldBack)) }
        if let closeAfter { members["close_after"] = .int(Int64(closeAfter)) }
        if let maxConcurrentStreams { members["max_concurrent_streams"] = .int(Int64(maxConcurrentStreams)) }
        if let silentAfter { members["silent_after"] = .int(Int64(silentAfter)) }
        if !streamLimit.isEmpty {
            var pairs: [JSONValue] = []
            for text in streamLimit {
                let parts = text.split(separator: ":")
                guard parts.count == 2, let after = Int64(parts[0]), let limit = Int64(parts[1]) else {
                    throw ValidationError("--stream-limit takes AFTER:LIMIT (e.g. 500:1), got '\(text)'")
                }
                pairs.append(.array([.int(after), .int(limit)]))
            }
            members["stream_limits"] = .array(pairs)
        }
        do { return try ConnectionBehaviour(json: .object(members)) } catch {
            // The rules speak of the JSON keys; say the flags' names.
            var message = error.message
            for key in [
                "goaway_held_back", "goaway_after", "close_after", "max_concurrent_streams", "silent_after",
            ] {
                message = message.replacingOccurrences(
                    of: key, with: "--" + key.replacingOccurrences(of: "_", with: "-"))
            }
            throw ValidationError(message.replacingOccurrences(of: "stream_limits", with: "--stream-limit"))
        }
    }

    func validate() throws {
        if goawayHeldBack != nil && goawayAfter == nil {
            throw ValidationError("--goaway-held-back needs --goaway-after")
        }
        if recordCapacity < 1 { throw ValidationError("--record-capacity must be at least 1") }
        _ = try behaviour()
        if (cert == nil) != (certKey == nil) { throw ValidationError("--cert and --cert-key go together") }
        if authKey != nil && authKeyPub != nil { throw ValidationError("give --auth-key or --auth-key-pub, not both") }
        if !(0...65535).contains(port) { throw ValidationError("--port must be 0 to 65535") }
    }

    /// Reads the --teams file.
    func readTeams(_ path: String) throws -> [MockTeam] {
        let document: JSONValue
        do { document = try JSONParser.parse(Data(try read(path, "--teams").utf8)) } catch let error as ValidationError
        {
            throw error
        } catch {
            throw ValidationError("--teams '\(path)' is not JSON: \(error)")
        }
        guard case .array(let entries)? = document["teams"] else {
            throw ValidationError("--teams '\(path)': expected {\"teams\": [{\"team_id\", \"keys\", \"bundle_ids\"}]}")
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        return try entries.enumerated().map { index, entry in
            let place = "--teams '\(path)', team \(index + 1)"
            guard let teamID = entry["team_id"]?.stringValue, !teamID.isEmpty else {
                throw ValidationError("\(place): team_id is required")
            }
            guard case .object(let keyFiles)? = entry["keys"], !keyFiles.isEmpty else {
                throw ValidationError("\(place) (\(teamID)): keys must map key ids to .p8 or public PEM files")
            }
            var keys: [String: String] = [:]
            for (keyID, file) in keyFiles {
                guard let file = file.stringValue else {
                    throw ValidationError("\(place) (\(teamID)): key \(keyID) must name a file")
                }
                let resolved = file.hasPrefix("/") ? file : directory.appendingPathComponent(file).path
                let pem = try read(resolved, "key \(keyID) of team \(teamID)")
                if let privateKey = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
                    keys[keyID] = privateKey.publicKey.pemRepresentation
                } else if (try? P256.Signing.PublicKey(pemRepresentation: pem)) != nil {
                    keys[keyID] = pem
                } else {
                    throw ValidationError("\(place) (\(teamID)): '\(resolved)' is not a P-256 .p8 or public key")
                }
            }
            var bundles: Set<String> = []
            if case .array(let list)? = entry["bundle_ids"] { bundles = Set(list.compactMap(\.stringValue)) }
            return MockTeam(teamID: teamID, keys: keys, bundleIDs: bundles)
        }
    }

    func read(_ path: String, _ what: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("cannot read \(what) '\(path)'")
        }
        return text
    }

    func run() async throws {
        var configuration: MockAPNsConfiguration
        if let cert, let certKey {
            configuration = MockAPNsConfiguration(
                certificateChainPEM: try read(cert, "--cert"), privateKeyPEM: try read(certKey, "--cert-key"))
        } else {
            let hosts = ["localhost", "127.0.0.1", host].uniqued()
            let directory = URL(fileURLWithPath: certsOut)
            let caPath = directory.appendingPathComponent("ca.pem").path
            if let existing = LocalCertificateAuthority.existing(in: directory, hosts: hosts) {
                // Another mock (or an earlier run) may still use this CA: keep it rather than break its senders.
                configuration = MockAPNsConfiguration(
                    certificateChainPEM: existing.server, privateKeyPEM: existing.serverKey)
                FileHandle.standardOutput.write(
                    Data("Reusing the throwaway CA: senders trust it with --ca \(caPath)\n".utf8))
            } else {
                let authority = try LocalCertificateAuthority(hosts: hosts)
                try authority.write(to: directory)
                configuration = MockAPNsConfiguration(
                    certificateChainPEM: authority.serverCertificatePEM, privateKeyPEM: authority.serverKeyPEM)
                FileHandle.standardOutput.write(
                    Data("Generated a throwaway CA: senders trust it with --ca \(caPath)\n".utf8))
            }
        }
        configuration.host = host
        configuration.port = port
        if let authKeyPub { configuration.tokenPublicKeyPEM = try read(authKeyPub, "--auth-key-pub") }
        if let authKey {
            do {
                configuration.tokenPublicKeyPEM = try P256.Signing.PrivateKey(
                    pemRepresentation: try read(authKey, "--auth-key")
                ).publicKey.pemRepresentation
            } catch let error as ValidationError { throw error } catch {
                throw ValidationError("'\(authKey)' is not a P-256 .p8 key")
            }
        }
        configuration.expectedKeyID = keyId
        configuration.expectedTeamID = teamId
        if let clientCa { configuration.clientCAPEM = try read(clientCa, "--client-ca") }
        if let teams { configuration.teams = try readTeams(teams) }
        configuration.broadcastDisabledBundles = Set(broadcastDisabled)
        let state = MockAPNsState(capacity: recordCapacity, behaviour: try behaviour())
        if let scripts {
            do { try state.loadScripts(try JSONParser.parse(Data(try read(scripts, "--scripts").utf8))) } catch {
                throw ValidationError("--scripts '\(scripts)': \(error)")
            }
        }
        var logger = Logger(label: "mock-apns")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let listenHost = configuration.host
        let server = try MockAPNsServer(configuration, state: state, logger: logger)
        try await server.run { port in
            // Written unbuffered so the line reaches a log file or pipe at once.
            FileHandle.standardOutput.write(
                Data("mock APNs listening on https://\(listenHost):\(port) (HTTP/2 + TLS)\n".utf8))
        }
    }
}

extension Array where Element: Hashable {
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
