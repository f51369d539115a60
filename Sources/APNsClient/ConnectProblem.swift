import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// Why a connection could not be set up, as a sentence that says what to do; and whether trying again can help.
struct ConnectProblem {
    var message: String
    /// TLS trust, a refused connection, a required client certificate: the same again would fail the same way.
    var isDefinitive: Bool

    init(_ error: (any Error)?, host: String, port: Int, names: APNsSettingNames = .flags) {
        let address = "\(host):\(port)"
        let raw = error.map { String(describing: $0) } ?? "the connection closed during set-up"
        let text = Self.readable(raw)
        let upper = raw.uppercased()
        if upper.contains("CERTIFICATE_REQUIRED") || upper.contains("ALERT_HANDSHAKE_FAILURE")
            || upper.contains("PEER_DID_NOT_RETURN_A_CERTIFICATE")
        {
            message =
                "TLS: \(address) requires a client certificate (certificate authentication): set "
                + "\(names.clientCertificate), or use token authentication if the server accepts it (\(text))"
            isDefinitive = true
        } else if upper.contains("CERTIFICATE_VERIFY_FAILED") || upper.contains("UNABLE_TO_GET_ISSUER")
            || upper.contains("SELF_SIGNED") || upper.contains("CERTIFICATE_VERIFY")
        {
            message =
                "TLS: the certificate of \(address) is not trusted (\(text)); for a local mock set \(names.trust) "
                + "to its ca.pem (mock-apns prints the path at start)"
            isDefinitive = true
        } else if upper.contains("HOSTNAME") || upper.contains("CANNOTMATCHULABEL") {
            message = "TLS: the certificate of \(address) is not valid for the name \(host) (\(text))"
            isDefinitive = true
        } else if Self.isRefused(error) || upper.contains("CONNECTION REFUSED") {
            message =
                "cannot connect to \(address): connection refused (is the server running there? check "
                + "\(names.host))"
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

    /// A TLS library error as words a user can act on: BoringSSL's reason codes (`CERTIFICATE_VERIFY_FAILED`)
    /// without the numeric codes and the source paths of the build that raised them.
    static func readable(_ text: String) -> String {
        var reasons: [String] = []
        var rest = Substring(text)
        while let marker = rest.range(of: "OPENSSL_internal:") {
            let tail = rest[marker.upperBound...]
            let reason = tail.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            if !reason.isEmpty, !reasons.contains(String(reason)) { reasons.append(String(reason)) }
            rest = tail
        }
        if !reasons.isEmpty { return reasons.joined(separator: ", ") }
        // Any other text: drop " at /path/file.c:123" source locations.
        var cleaned = ""
        var remaining = Substring(text)
        while let at = remaining.range(of: " at /") {
            cleaned += remaining[..<at.lowerBound]
            remaining = remaining[at.upperBound...].drop { $0 != "]" && $0 != ")" && $0 != "," }
        }
        return cleaned + remaining
    }

    private static func isRefused(_ error: (any Error)?) -> Bool {
        if let error = error as? NIOConnectionError {
            return error.connectionErrors.contains { ($0.error as? IOError)?.errnoCode == ECONNREFUSED }
        }
        return (error as? IOError)?.errnoCode == ECONNREFUSED
    }
}
