import APNsCore
import Foundation
public import NIOSSL

/// Loads client credentials for certificate authentication.
public enum NIOSSLCertificateLoader {
    /// A certificate chain from PEM text (leaf first).
    public static func chain(pem: String) throws -> [NIOSSLCertificate] {
        try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8))
    }

    /// A private key from PEM text.
    public static func key(pem: String) throws -> NIOSSLPrivateKey {
        try NIOSSLPrivateKey(bytes: Array(pem.utf8), format: .pem)
    }

    /// Chain and key from a PKCS#12 (.p12) file, as exported from Keychain Access.
    public static func pkcs12(path: String, passphrase: String) throws -> (
        chain: [NIOSSLCertificate], key: NIOSSLPrivateKey
    ) {
        let bundle = try NIOSSLPKCS12Bundle(file: path, passphrase: Array(passphrase.utf8))
        return (bundle.certificateChain, bundle.privateKey)
    }
}

/// Credentials read from files, with messages that name the file and say what was expected (never its content).
///
/// `push-sender send` and the service's delivery both load their credentials here.
public enum APNsCredentialFiles {
    /// Token authentication from a `.p8` key file, its key id and the team id.
    public static func token(keyFile: String, keyID: String, teamID: String) throws(APNsConfigurationError)
        -> APNsCredentials
    {
        guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
            throw APNsConfigurationError("cannot read the key file '\(keyFile)'")
        }
        guard let key = try? APNsTokenManager.loadKey(pem: pem) else {
            throw APNsConfigurationError(
                "'\(keyFile)' is not a P-256 .p8 key (expected -----BEGIN PRIVATE KEY----- as downloaded from Apple)")
        }
        return .token(APNsTokenManager(keyID: keyID, teamID: teamID, key: key))
    }

    /// Certificate authentication from a PKCS#12 file; `passwordSource` names where the password came from.
    public static func pkcs12(file: String, password: String, passwordSource: String) throws(APNsConfigurationError)
        -> APNsCredentials
    {
        guard let bundle = try? NIOSSLCertificateLoader.pkcs12(path: file, passphrase: password) else {
            throw APNsConfigurationError("cannot open '\(file)' as PKCS#12: wrong file or \(passwordSource)")
        }
        return .certificate(chain: bundle.chain, key: bundle.key)
    }

    /// Certificate authentication from a PEM certificate (chain) and its PEM private key; the key must be the
    /// certificate's (a `.p8` token key given here is named as such, with the setting it belongs in).
    public static func certificate(
        certFile: String, keyFile: String, names: APNsSettingNames = .flags
    ) throws(APNsConfigurationError) -> APNsCredentials {
        guard let certPEM = try? String(contentsOfFile: certFile, encoding: .utf8) else {
            throw APNsConfigurationError("\(names.certificate): cannot read the certificate '\(certFile)'")
        }
        guard let keyPEM = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
            throw APNsConfigurationError("\(names.certificateKey): cannot read the private key '\(keyFile)'")
        }
        guard let chain = try? NIOSSLCertificateLoader.chain(pem: certPEM), !chain.isEmpty else {
            throw APNsConfigurationError("\(names.certificate): '\(certFile)' holds no PEM certificate")
        }
        let looksLikeTokenKey = (try? APNsTokenManager.loadKey(pem: keyPEM)) != nil
        guard let key = try? NIOSSLCertificateLoader.key(pem: keyPEM) else {
            throw APNsConfigurationError("\(names.certificateKey): '\(keyFile)' holds no PEM private key")
        }
        // A key that is not the certificate's fails the TLS set-up: say so here, naming the setting.
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateChain = chain.map { .certificate($0) }
        tls.privateKey = .privateKey(key)
        if (try? NIOSSLContext(configuration: tls)) == nil {
            if looksLikeTokenKey {
                throw APNsConfigurationError(
                    "\(names.certificateKey): '\(keyFile)' is a P-256 key such as a .p8 token-authentication key, not the private key of the certificate '\(certFile)'; a .p8 key belongs in \(names.tokenKey)"
                )
            }
            throw APNsConfigurationError(
                "\(names.certificateKey): '\(keyFile)' is not the private key of the certificate '\(certFile)' (export both from the same Keychain item, or use a .p12)"
            )
        }
        return .certificate(chain: chain, key: key)
    }

    /// The PEM text of an extra CA file to trust.
    public static func trustRoots(caFile: String) throws(APNsConfigurationError) -> String {
        guard let pem = try? String(contentsOfFile: caFile, encoding: .utf8),
            (try? NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))?.isEmpty == false
        else {
            throw APNsConfigurationError("cannot read '\(caFile)' as a PEM CA certificate")
        }
        return pem
    }
}
