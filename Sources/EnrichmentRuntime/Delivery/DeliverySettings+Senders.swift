import APNsClient
import APNsCore
import Essentials
import NIOCore

// Credentials are read here, once at start-up, and turned into one APNs client per environment; the delivery
// engine is handed the clients and never sees a credential.
extension DeliverySettings {
    /// One APNs client per environment from the configured credentials; empty when none are configured.
    func makeSenders() throws(ConfigurationError) -> [APNsEnvironmentName: any APNsBatchSending] {
        guard isConfigured else { return [:] }
        let credentials: APNsCredentials
        var trust: String?
        do throws(APNsConfigurationError) {
            if let keyFile, let keyID, let teamID {
                credentials = try APNsCredentialFiles.token(keyFile: keyFile, keyID: keyID, teamID: teamID)
            } else if let p12File {
                credentials = try APNsCredentialFiles.pkcs12(
                    file: p12File, password: p12Password?.exposed ?? "", passwordSource: "ENRICH_APNS_P12_PASSWORD")
            } else if let certificateFile, let certificateKeyFile {
                credentials = try APNsCredentialFiles.certificate(
                    certFile: certificateFile, keyFile: certificateKeyFile,
                    names: .service(environment: "sandbox"))
            } else {
                throw APNsConfigurationError("incomplete APNs credentials")
            }
            if let caFile { trust = try APNsCredentialFiles.trustRoots(caFile: caFile) }
        } catch {
            throw ConfigurationError(
                setting: "ENRICH_APNS_*", value: "", allowed: "readable APNs credentials",
                problem: error.description)
        }
        var senders: [APNsEnvironmentName: any APNsBatchSending] = [:]
        for (environment, url) in [(APNsEnvironmentName.sandbox, sandboxURL), (.production, productionURL)] {
            do {
                var configuration = APNsSenderConfiguration(
                    environment: .custom(url), credentials: credentials, additionalTrustRootsPEM: trust,
                    connections: connections, eventLoops: eventLoops, connectTimeout: .seconds(5),
                    requestTimeout: .milliseconds(Int64(requestTimeout * 1000)),
                    pingInterval: .milliseconds(Int64(pingInterval * 1000)),
                    pingTimeout: .milliseconds(Int64(pingTimeout * 1000)),
                    // The outbox retries with its own durable backoff; the client makes one attempt.
                    retry: RetryPolicy(maxAttempts: 1))
                configuration.settingNames = .service(environment: environment.rawValue)
                senders[environment] = try APNsSender(configuration: configuration)
            } catch {
                throw ConfigurationError(
                    setting: environment == .sandbox ? "ENRICH_APNS_SANDBOX_URL" : "ENRICH_APNS_PRODUCTION_URL",
                    value: url, allowed: "an https://host[:port] APNs base URL", problem: "\(error)")
            }
        }
        return senders
    }
}
