import ArgumentParser
import Essentials
import FCMCore
import Foundation
import Logging
import MockAPNs
import MockFCM
import _CryptoExtras

/// `push-sender mock-fcm`: a local Firebase Cloud Messaging (HTTP v1) over HTTP/2 + TLS.
struct MockFCMCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-fcm",
        abstract:
            "Run a local FCM (HTTP/2 + TLS): the OAuth token endpoint and the HTTP v1 send endpoint, checked as Google does.",
        discussion: """
            Without --service-account a throwaway service account is made (a 2048-bit RSA key) and written to \
            --account-out with its token_uri pointing at this mock; an account already there is reused. Senders use \
            it as their service-account file and trust --certs-out/ca.pem (a throwaway CA, reused while valid, shared \
            with mock-apns when both write to one folder). The token endpoint (POST /token) verifies the RS256 \
            assertion with the account's key and issues access tokens; the send endpoint \
            (POST /v1/projects/{project}/messages:send) checks the bearer token it issued, the message's shape and \
            FCM's 4,096-byte payload, and answers Google's error bodies.

            Failures per registration token come from --scripts (JSON: {"<token>": {"error": "UNREGISTERED", \
            "times": 1, "retry_after": 0, "delay_ms": 0}}; errors: UNREGISTERED, INVALID_ARGUMENT, \
            SENDER_ID_MISMATCH, QUOTA_EXCEEDED, UNAVAILABLE, INTERNAL, THIRD_PARTY_AUTH_ERROR) or the control \
            endpoints: GET/POST/DELETE /control/scripts, GET/DELETE /control/received, POST /control/token-endpoint \
            ({"refuse": true, "delay_ms": 0}), POST /control/revoke, GET /control/stats.

            A round trip:
              push-sender mock-fcm --port 8443 &
              push-sender send --fcm --service-account data/mock-fcm/service-account.json \\
                --fcm-url https://127.0.0.1:8443 --ca data/mock-fcm/ca.pem --payload payloads/location.json \\
                --token demo:APA91bToken
            """)

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free one).") var port = 8443
    @Option(help: "Server certificate chain (PEM); default: made at start.") var cert: String?
    @Option(help: "Private key (PEM) of --cert.") var certKey: String?
    @Option(help: "Where the generated CA and server certificate are written.") var certsOut = "data/mock-fcm"
    @Option(help: "A service-account key file whose assertions the token endpoint accepts (repeatable).")
    var serviceAccount: [String] = []
    @Option(help: "Where the throwaway service account is written (without --service-account).") var accountOut =
        "data/mock-fcm/service-account.json"
    @Option(help: "The throwaway service account's Firebase project id.") var project = "demo-project"
    @Option(help: "Failure scripts per registration token (JSON file; see above).") var scripts: String?
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS sent to each connection.") var maxConcurrentStreams = 100
    @Option(help: "Messages kept in the record (GET /control/received); the oldest go first.") var recordCapacity =
        100_000
    @Option(help: "trace, debug, info, notice, warning, error.") var logLevel = "info"

    func validate() throws {
        if !(0...65535).contains(port) { throw ValidationError("--port must be 0 to 65535") }
        if (cert == nil) != (certKey == nil) { throw ValidationError("--cert and --cert-key go together") }
        if recordCapacity < 1 { throw ValidationError("--record-capacity must be at least 1") }
        if !(1...10_000).contains(maxConcurrentStreams) {
            throw ValidationError("--max-concurrent-streams must be 1 to 10000")
        }
        if project.isEmpty
            || !project.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D })
        {
            throw ValidationError("--project is a Firebase project id: lower-case letters, digits and '-'")
        }
    }

    private func read(_ path: String, _ what: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("cannot read \(what) '\(path)'")
        }
        return text
    }

    /// The accounts given, or the throwaway one (reused from --account-out when it is there).
    private func accounts() throws -> (accounts: [FCMServiceAccount], throwaway: FCMServiceAccount?) {
        if !serviceAccount.isEmpty {
            return (
                try serviceAccount.map { file in
                    do { return try FCMServiceAccount(json: Data(try read(file, "--service-account").utf8)) } catch let
                        error as FCMCredentialProblem
                    {
                        throw ValidationError("--service-account '\(file)': \(error.message)")
                    }
                }, nil
            )
        }
        if let data = FileManager.default.contents(atPath: accountOut),
            let existing = try? FCMServiceAccount(json: data),
            existing.projectID == project
        {
            return ([existing], existing)
        }
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let account = FCMServiceAccount(
            projectID: project, clientEmail: "mock-fcm@\(project).iam.gserviceaccount.com",
            privateKey: Secret(key.pkcs8PEMRepresentation),
            privateKeyID: "mock-\(UUID().uuidString.prefix(8).lowercased())")
        return ([account], account)
    }

    func run() async throws {
        let pair: (chain: String, key: String)
        if let cert, let certKey {
            pair = (try read(cert, "--cert"), try read(certKey, "--cert-key"))
        } else {
            let hosts = ["localhost", "127.0.0.1", host].uniqued()
            let directory = URL(fileURLWithPath: certsOut)
            let caPath = directory.appendingPathComponent("ca.pem").path
            if let existing = LocalCertificateAuthority.existing(in: directory, hosts: hosts) {
                pair = (existing.server, existing.serverKey)
                FileHandle.standardOutput.write(
                    Data("Reusing the throwaway CA: senders trust it with --ca \(caPath)\n".utf8))
            } else {
                let authority = try LocalCertificateAuthority(hosts: hosts)
                try authority.write(to: directory)
                pair = (authority.serverCertificatePEM, authority.serverKeyPEM)
                FileHandle.standardOutput.write(
                    Data("Generated a throwaway CA: senders trust it with --ca \(caPath)\n".utf8))
            }
        }
        let (accounts, throwaway) = try accounts()
        var configuration = MockFCMConfiguration(
            certificateChainPEM: pair.chain, privateKeyPEM: pair.key,
            accounts: try accounts.map { try MockFCMAccount($0) })
        configuration.host = host
        configuration.port = port
        configuration.maxConcurrentStreams = maxConcurrentStreams
        let state = MockFCMState(recordCapacity: recordCapacity)
        if let scripts {
            let text = try read(scripts, "--scripts")
            guard case .object(let members)? = try? JSONParser.parse(Data(text.utf8)) else {
                throw ValidationError("--scripts '\(scripts)': expected {\"<token>\": {\"error\": \"UNREGISTERED\"}}")
            }
            for (token, value) in members {
                do { state.script(token, try MockFCMScript(json: value)) } catch {
                    throw ValidationError("--scripts '\(scripts)', token \(token): \(error.message)")
                }
            }
        }
        var logger = Logger(label: "mock-fcm")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let server = try MockFCMServer(configuration, state: state, logger: logger)
        let listenHost = host
        let accountOut = self.accountOut
        try await server.run { port in
            if var account = throwaway {
                // The account's token endpoint is this mock, at the port it got.
                account.tokenURI = "https://\(listenHost):\(port)/token"
                try? FileManager.default.createDirectory(
                    at: URL(fileURLWithPath: accountOut).deletingLastPathComponent(), withIntermediateDirectories: true)
                FileManager.default.createFile(
                    atPath: accountOut, contents: Data(account.json), attributes: [.posixPermissions: 0o600])
                FileHandle.standardOutput.write(
                    Data("Service account (project \(account.projectID)) written to \(accountOut)\n".utf8))
            }
            FileHandle.standardOutput.write(
                Data("mock FCM listening on https://\(listenHost):\(port) (HTTP/2 + TLS)\n".utf8))
        }
    }
}
