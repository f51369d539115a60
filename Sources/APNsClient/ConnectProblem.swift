import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// Why a connection could not be set up, as a sentence that says what to do; and whether trying again can help.
struct ConnectProblem {
    var message: String
    /// TLS trust, a refused connection, a required client certificate: the same again would fail the same way.
    var isDefinitive: Bool

    init(_ error: (any Error)?, host: String, port: Int) {
        let address = "\(host):\(port)"
        let text = error.map { String(describing: $0) } ?? "the connection closed during set-up"
        let upper = text.uppercased()
        if upper.contains("CERTIFICATE_REQUIRED") || upper.contains("ALERT_HANDSHAKE_FAILURE")
            || upper.contains("PEER_DID_NOT_RETURN_A_CERTIFICATE")
        {
            message =
                "TLS: \(address) requires a client certificate (certificate authentication): pass --cert and "
                + "--cert-key, or use token authentication if the server accepts it (\(text))"
            isDefinitive = true
        } else if upper.contains("CERTIFICATE_VERIFY_FAILED") || upper.contains("UNABLE_TO_GET_ISSUER")
            || upper.contains("SELF_SIGNED") || upper.contains("CERTIFICATE_VERIFY")
        {
            message =
                "TLS: the certificate of \(address) is not trusted; for a local mock pass --ca with its ca.pem "
                + "(mock-apns prints the path at start) (\(text))"
            isDefinitive = true
        } else if upper.contains("HOSTNAME") || upper.contains("CANNOTMATCHULABEL") {
            message = "TLS: the certificate of \(address) is not valid for the name \(host) (\(text))"
            isDefinitive = true
        } else if Self.isRefused(error) || upper.contains("CONNECTION REFUSED") {
            message =
                "cannot connect to \(address): connection refused (is the server running there? check --url or "
                + "--environment)"
            isDefinitive = true
        } else if error is ChannelError, case .connectTimeout? = error as? ChannelError {
            message = "cannot connect to \(address): no answer within the connect timeout"
            isDefinitive = false
        } else if error is NIOSSLError || error is BoringSSLError {
            message = "TLS with \(address) failed: \(text)"
            isDefinitive = true
        } else {
            message = "cannot set up HTTP/2 with \(address): \(text)"
            isDefinitive = false
        }
    }

    private static func isRefused(_ error: (any Error)?) -> Bool {
        if let error = error as? NIOConnectionError {
            return error.connectionErrors.contains { ($0.error as? IOError)?.errnoCode == ECONNREFUSED }
        }
        return (error as? IOError)?.errnoCode == ECONNREFUSED
    }
}
