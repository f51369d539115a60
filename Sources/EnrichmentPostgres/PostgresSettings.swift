public import Essentials
import Foundation
import NIOSSL
public import PostgresNIO

// How to reach PostgreSQL: the settings parsed from a database URL, the connection and pool configurations made
// from them, and the error that names a URL that cannot work.

/// How to reach PostgreSQL: parsed from `postgres://user:password@host:port/database?sslmode=...`.
public struct PostgresSettings: Sendable, CustomStringConvertible {
    public enum TLSMode: String, Sendable, CaseIterable {
        /// No TLS (loopback, or a private network you trust).
        case disable
        /// TLS when the server offers it.
        case prefer
        /// TLS, with the server's certificate verified against the system's roots (or `rootCertificate`).
        case require
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: Secret?
    public var database: String
    public var tls: TLSMode
    /// An extra CA (PEM file) to verify the server with.
    public var rootCertificate: String?
    public var maximumConnections = 20
    public var connectTimeout: Duration = .seconds(10)
    /// At start-up, how long to keep trying a database that refuses connections or is still starting (a
    /// warning per try); 0 gives up at the first failure.
    public var startupWait: Duration = .zero

    /// Parses a `postgres://` (or `postgresql://`) URL; throws a sentence that never repeats the password.
    public init(url: String) throws(PostgresSettingsError) {
        guard let components = URLComponents(string: url),
            components.scheme == "postgres" || components.scheme == "postgresql"
        else {
            throw PostgresSettingsError(
                "the database URL must look like postgres://user:password@host:5432/database (the scheme was not postgres://)"
            )
        }
        guard let host = components.host, !host.isEmpty else {
            throw PostgresSettingsError("the database URL names no host: postgres://user:password@HOST:5432/database")
        }
        guard let user = components.user, !user.isEmpty else {
            throw PostgresSettingsError("the database URL names no user: postgres://USER:password@host:5432/database")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else {
            throw PostgresSettingsError(
                "the database URL names no database: postgres://user:password@host:5432/DATABASE")
        }
        self.host = host
        self.port = components.port ?? 5432
        self.username = user.removingPercentEncoding ?? user
        self.password = components.password.map { Secret($0.removingPercentEncoding ?? $0) }
        self.database = database
        var tls = TLSMode.prefer
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                switch item.value ?? "" {
                case "disable": tls = .disable
                case "allow", "prefer": tls = .prefer
                case "require", "verify-ca", "verify-full": tls = .require
                default:
                    throw PostgresSettingsError(
                        "sslmode '\(item.value ?? "")' is unknown; use disable, prefer or require")
                }
            case "sslrootcert": rootCertificate = item.value
            default:
                throw PostgresSettingsError(
                    "database URL parameter '\(item.name)' is unknown; accepted: sslmode, sslrootcert")
            }
        }
        self.tls = tls
    }

    /// The URL with the password replaced (for logs and errors).
    public var description: String {
        "postgres://\(username)\(password == nil ? "" : ":***")@\(host):\(port)/\(database) (tls \(tls.rawValue))"
    }

    /// The same settings for one connection (the start-up probe that also migrates).
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tlsConfiguration = self.tlsConfiguration
        let mode: PostgresConnection.Configuration.TLS =
            switch tls {
            case .disable: .disable
            case .prefer: .prefer(try NIOSSLContext(configuration: tlsConfiguration))
            case .require: .require(try NIOSSLContext(configuration: tlsConfiguration))
            }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password?.exposed, database: database, tls: mode)
        configuration.options.connectTimeout = .nanoseconds(
            Int64(connectTimeout.components.seconds) * 1_000_000_000 + connectTimeout.components.attoseconds
                / 1_000_000_000)
        return configuration
    }

    /// The client TLS settings: the system's roots, plus `rootCertificate` when given.
    var tlsConfiguration: TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificate { configuration.additionalTrustRoots = [.file(rootCertificate)] }
        return configuration
    }

    public func clientConfiguration() throws -> PostgresClient.Configuration {
        let tlsConfiguration = self.tlsConfiguration
        let mode: PostgresClient.Configuration.TLS =
            switch tls {
            case .disable: .disable
            case .prefer: .prefer(tlsConfiguration)
            case .require: .require(tlsConfiguration)
            }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password?.exposed, database: database, tls: mode)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = connectTimeout
        return configuration
    }
}

/// A database URL that cannot work, in words (never with the password).
public struct PostgresSettingsError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
