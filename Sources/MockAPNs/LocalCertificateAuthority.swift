import Crypto
public import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A throwaway certificate authority and a server certificate for 127.0.0.1/localhost, made in memory.
///
/// Used by `mock-apns` when no certificate is given, and by tests; the CA certificate is what a sender trusts
/// (`--ca`). Nothing here is meant for production.
public struct LocalCertificateAuthority: Sendable {
    public let caCertificatePEM: String
    public let serverCertificatePEM: String
    public let serverKeyPEM: String
    /// A client certificate and key signed by the same CA (for certificate-auth tests).
    public let clientCertificatePEM: String
    public let clientKeyPEM: String

    /// Makes a new CA, a server certificate valid for `hosts` (DNS names or IPv4 addresses) and a client certificate.
    public init(hosts: [String] = ["localhost", "127.0.0.1"], validDays: Int = 30) throws {
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("push-enrichment throwaway CA") }
        let now = Date()
        let until = now.addingTimeInterval(Double(validDays) * 86_400)
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: until, issuer: caName, subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(caKey))

        let serverKey = P256.Signing.PrivateKey()
        let names: [GeneralName] = hosts.map { host in
            let octets = host.split(separator: ".").compactMap { UInt8($0) }
            if octets.count == 4 { return .ipAddress(ASN1OctetString(contentBytes: ArraySlice(octets))) }
            return .dnsName(host)
        }
        let server = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: until, issuer: caName,
            subject: try DistinguishedName { CommonName(hosts.first ?? "localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: .init(caKey))

        let clientKey = P256.Signing.PrivateKey()
        let client = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(clientKey.publicKey),
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: until, issuer: caName,
            subject: try DistinguishedName { CommonName("Apple Push Services: com.example.app") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
            },
            issuerPrivateKey: .init(caKey))

        caCertificatePEM = try ca.serializeAsPEM().pemString
        serverCertificatePEM = try server.serializeAsPEM().pemString
        serverKeyPEM = serverKey.pemRepresentation
        clientCertificatePEM = try client.serializeAsPEM().pemString
        clientKeyPEM = clientKey.pemRepresentation
    }

    /// Writes `ca.pem`, `server.pem`, `server-key.pem`, `client.pem`, `client-key.pem` into `directory`.
    public func write(to directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, text) in [
            ("ca.pem", caCertificatePEM), ("server.pem", serverCertificatePEM),
            ("server-key.pem", serverKeyPEM), ("client.pem", clientCertificatePEM),
            ("client-key.pem", clientKeyPEM),
        ] {
            try Data(text.utf8).write(to: directory.appendingPathComponent(name))
        }
    }

    /// The CA and server certificate that an earlier `write(to:)` left in `directory`, when the server certificate
    /// still covers `hosts` for at least a day: a second mock then reuses them instead of replacing the CA that a
    /// running mock and its senders still use.
    public static func existing(in directory: URL, hosts: [String]) -> (ca: String, server: String, serverKey: String)?
    {
        func read(_ name: String) -> String? {
            try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
        }
        guard let ca = read("ca.pem"), let server = read("server.pem"), let key = read("server-key.pem"),
            let certificate = try? Certificate(pemEncoded: server),
            certificate.notValidAfter > Date().addingTimeInterval(86_400),
            let names = try? certificate.extensions.subjectAlternativeNames
        else { return nil }
        var covered: Set<String> = []
        for name in names {
            switch name {
            case .dnsName(let host): covered.insert(host)
            case .ipAddress(let octets) where octets.bytes.count == 4:
                covered.insert(octets.bytes.map(String.init).joined(separator: "."))
            default: break
            }
        }
        return hosts.allSatisfy(covered.contains) ? (ca, server, key) : nil
    }
}
