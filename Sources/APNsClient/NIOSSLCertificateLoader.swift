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
