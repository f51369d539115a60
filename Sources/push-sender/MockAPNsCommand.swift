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
            to --certs-out (ca.pem is what senders trust with --ca). Failures per device token come from --scripts \
            (JSON: {"<token>": {"status": 410, "reason": "Unregistered", "times": 1, "delay_ms": 0}}) or from the \
            control endpoints: POST /control/scripts, DELETE /control/scripts, GET /control/received, \
            DELETE /control/received.
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
    @Option(help: "trace, debug, info, notice, warning, error.") var logLevel = "info"

    func validate() throws {
        if (cert == nil) != (certKey == nil) { throw ValidationError("--cert and --cert-key go together") }
        if authKey != nil && authKeyPub != nil { throw ValidationError("give --auth-key or --auth-key-pub, not both") }
        if !(0...65535).contains(port) { throw ValidationError("--port must be 0 to 65535") }
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
            let authority = try LocalCertificateAuthority(hosts: ["localhost", "127.0.0.1", host].uniqued())
            let directory = URL(fileURLWithPath: certsOut)
            try authority.write(to: directory)
            configuration = MockAPNsConfiguration(
                certificateChainPEM: authority.serverCertificatePEM, privateKeyPEM: authority.serverKeyPEM)
            FileHandle.standardOutput.write(
                Data(
                    "Generated a throwaway CA: senders trust it with --ca \(directory.appendingPathComponent("ca.pem").path)\n"
                        .utf8))
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
        let state = MockAPNsState()
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
