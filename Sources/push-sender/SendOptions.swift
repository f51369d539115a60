import APNsClient
import APNsCore
import ArgumentParser
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
    @Option(help: "Pushes in flight at once (HTTP/2 streams over all connections).") var concurrency = 64
    @Option(help: "Seconds to wait for a connection (short, so an untrusted certificate shows quickly).")
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

    var hasCredentials: Bool { key != nil || cert != nil || p12 != nil }

    func credentials() throws -> APNsCredentials {
        if let key, let keyId, let teamId {
            guard let pem = try? String(contentsOfFile: key, encoding: .utf8) else {
                throw ValidationError("cannot read the key file '\(key)'")
            }
            do {
                return .token(
                    APNsTokenManager(keyID: keyId, teamID: teamId, key: try APNsTokenManager.loadKey(pem: pem)))
            } catch {
                throw ValidationError(
                    "'\(key)' is not a P-256 .p8 key (expected -----BEGIN PRIVATE KEY----- as downloaded from Apple)")
            }
        }
        if let p12 {
            let password = ProcessInfo.processInfo.environment["PUSH_SENDER_P12_PASSWORD"] ?? ""
            do {
                let bundle = try NIOSSLCertificateLoader.pkcs12(path: p12, passphrase: password)
                return .certificate(chain: bundle.chain, key: bundle.key)
            } catch {
                throw ValidationError("cannot open '\(p12)' as PKCS#12: wrong file or PUSH_SENDER_P12_PASSWORD")
            }
        }
        if let cert, let certKey {
            guard let certPEM = try? String(contentsOfFile: cert, encoding: .utf8),
                let keyPEM = try? String(contentsOfFile: certKey, encoding: .utf8)
            else {
                throw ValidationError("cannot read --cert '\(cert)' or --cert-key '\(certKey)'")
            }
            return .certificate(
                chain: try NIOSSLCertificateLoader.chain(pem: certPEM),
                key: try NIOSSLCertificateLoader.key(pem: keyPEM))
        }
        throw ValidationError(
            "no credentials: give --key, --key-id and --team-id (token auth) or --cert/--cert-key or --p12")
    }

    func senderConfiguration() throws -> APNsSenderConfiguration {
        var trust: String?
        if let ca {
            guard let pem = try? String(contentsOfFile: ca, encoding: .utf8) else {
                throw ValidationError("cannot read --ca '\(ca)'")
            }
            trust = pem
        }
        return APNsSenderConfiguration(
            environment: environment, credentials: try credentials(), additionalTrustRootsPEM: trust,
            connections: connections, connectTimeout: .milliseconds(Int64(connectTimeout * 1000)),
            retry: RetryPolicy(maxAttempts: attempts))
    }
}

/// The APNs headers.
struct HeaderOptions: ParsableArguments {
    @Option(help: "The app's bundle id; the push type's suffix (.voip, .complication, ...) is added when missing.")
    var topic: String
    @Option(help: "apns-push-type: \(PushType.allCases.map(\.rawValue).joined(separator: ", ")).") var pushType:
        String = "alert"
    @Option(help: "apns-priority: 10 (immediate), 5 (power-considerate; required for background) or 1.") var priority:
        Int?
    @Option(help: "apns-expiration: epoch seconds, or 0 to deliver once or never.") var expiration: String?
    @Option(help: "apns-collapse-id (at most 64 bytes).") var collapseId: String?
    @Option(help: "apns-id: a UUID for this push (default: APNs assigns one).") var apnsId: String?

    func validate() throws {
        guard let type = PushType(rawValue: pushType) else {
            throw ValidationError(
                "--push-type '\(pushType)' is not one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if let priority, ![1, 5, 10].contains(priority) { throw ValidationError("--priority must be 10, 5 or 1") }
        if type == .background, let priority, priority != 5 {
            throw ValidationError("background pushes need --priority 5")
        }
    }
}

/// Which device tokens to send to.
struct TokenOptions: ParsableArguments {
    @Option(name: .customLong("token"), help: "A device token (64 hex characters); repeat for several.") var tokens:
        [String] = []
    @Option(help: "A file with one device token per line (# starts a comment).") var tokensFile: String?

    func all() throws -> [String] {
        var result = tokens
        if let tokensFile {
            // Read as bytes: one ill-formed line (a stray byte) must fail that token only, not the whole run.
            guard let bytes = FileManager.default.contents(atPath: tokensFile) else {
                throw ValidationError("cannot read --tokens-file '\(tokensFile)'")
            }
            for line in bytes.split(separator: UInt8(ascii: "\n")) {
                var token = line.prefix { $0 != UInt8(ascii: "#") }
                while let first = token.first, first == 0x20 || first == 0x09 || first == 0x0D {
                    token = token.dropFirst()
                }
                while let last = token.last, last == 0x20 || last == 0x09 || last == 0x0D { token = token.dropLast() }
                if !token.isEmpty { result.append(String(decoding: token, as: UTF8.self)) }
            }
        }
        if result.isEmpty { throw ValidationError("give at least one --token HEX or a --tokens-file") }
        return result
    }
}
