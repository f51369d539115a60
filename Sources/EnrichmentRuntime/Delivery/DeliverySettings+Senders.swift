import APNsClient
import APNsCore
import Essentials
import FCMCore
import Foundation
import NIOCore

// Credentials are read here, once at start-up, and turned into one APNs client per environment; the delivery
// engine is handed the clients and never sees a credential.
extension DeliverySettings {
    /// One APNs client per credential and environment from the configured credentials (the `ENRICH_APNS_*`
    /// settings as `default`, and each credential of the apps file); empty when none are configured. Every
    /// credential is read and checked here, at start-up: a problem names the credential and the apps using it.
    func makeSenders(_ loaded: LoadedCredentials) throws(ConfigurationError) -> [SenderKey: any APNsBatchSending] {
        let (credentials, trust) = (loaded.credentials, loaded.trust)
        var senders: [SenderKey: any APNsBatchSending] = [:]
        for (name, credential) in credentials {
            for (environment, url) in [(APNsEnvironmentName.sandbox, sandboxURL), (.production, productionURL)] {
                do {
                    var configuration = APNsSenderConfiguration(
                        environment: .custom(url), credentials: credential, additionalTrustRootsPEM: trust,
                        connections: connections, eventLoops: eventLoops, connectTimeout: .seconds(5),
                        requestTimeout: .milliseconds(Int64(requestTimeout * 1000)),
                        pingInterval: .milliseconds(Int64(pingInterval * 1000)),
                        pingTimeout: .milliseconds(Int64(pingTimeout * 1000)),
                        // The outbox retries with its own durable backoff; the client makes one attempt.
                        retry: RetryPolicy(maxAttempts: 1))
                    configuration.settingNames = .service(environment: environment.rawValue)
                    senders[SenderKey(credential: name, environment: environment)] = try APNsSender(
                        configuration: configuration)
                } catch {
                    throw ConfigurationError(
                        setting: environment == .sandbox ? "ENRICH_APNS_SANDBOX_URL" : "ENRICH_APNS_PRODUCTION_URL",
                        value: url, allowed: "an https://host[:port] APNs base URL", problem: "\(error)")
                }
            }
        }
        for (name, account) in loaded.fcmAccounts {
            do {
                senders[SenderKey(credential: name, environment: .fcm)] = try FCMDeliverySender(
                    account: account, baseURL: fcmURL, additionalTrustRootsPEM: loaded.fcmTrust,
                    requestTimeout: requestTimeout)
            } catch {
                throw ConfigurationError(
                    setting: "ENRICH_FCM_URL", value: fcmURL, allowed: "an https:// FCM base URL", problem: "\(error)")
            }
        }
        return senders
    }

    /// One channel-management and broadcast client per credential and environment (broadcast channels).
    func makeChannelClients(_ loaded: LoadedCredentials) throws(ConfigurationError)
        -> [SenderKey: any APNsChannelManaging]
    {
        let (credentials, trust) = (loaded.credentials, loaded.trust)
        var clients: [SenderKey: any APNsChannelManaging] = [:]
        for (name, credential) in credentials {
            for environment in [APNsEnvironmentName.sandbox, .production] {
                let hosts = APNsBroadcastHosts(
                    managementURL: channelsURL(for: environment), broadcastURL: broadcastURL(for: environment))
                do {
                    clients[SenderKey(credential: name, environment: environment)] = try APNsBroadcastClient(
                        hosts: hosts, credentials: credential, additionalTrustRootsPEM: trust,
                        // A request of the API waits on it: an unreachable APNs answers 503 within this.
                        timeout: .milliseconds(Int64(min(requestTimeout, 10) * 1000)))
                } catch {
                    throw ConfigurationError(
                        setting: "credential '\(name)'", value: "", allowed: "a usable TLS set-up for channel requests",
                        problem: "\(error)")
                }
            }
        }
        return clients
    }

    /// Every configured credential, read and checked once (one token manager per key, shared by the push and the
    /// channel clients, so a key's JWT is not made twice), with the extra trust roots.
    func loadCredentials() throws(ConfigurationError) -> LoadedCredentials {
        guard isConfigured else { return LoadedCredentials(credentials: [], trust: nil) }
        var trust: String?
        if let caFile {
            do throws(APNsConfigurationError) { trust = try APNsCredentialFiles.trustRoots(caFile: caFile) } catch {
                throw ConfigurationError(
                    setting: "ENRICH_APNS_CA", value: caFile, allowed: "a PEM CA file", problem: error.description)
            }
        }
        var credentials: [(String, APNsCredentials)] = []
        let (fcmAccounts, fcmTrust) = try loadFCMAccounts()
        if hasDefaultCredential {
            do throws(APNsConfigurationError) {
                if let keyFile, let keyID, let teamID {
                    credentials.append(
                        (
                            SenderKey.defaultCredential,
                            try APNsCredentialFiles.token(keyFile: keyFile, keyID: keyID, teamID: teamID)
                        ))
                } else if let p12File {
                    credentials.append(
                        (
                            SenderKey.defaultCredential,
                            try APNsCredentialFiles.pkcs12(
                                file: p12File, password: p12Password?.exposed ?? "",
                                passwordSource: "ENRICH_APNS_P12_PASSWORD")
                        ))
                } else if let certificateFile, let certificateKeyFile {
                    credentials.append(
                        (
                            SenderKey.defaultCredential,
                            try APNsCredentialFiles.certificate(
                                certFile: certificateFile, keyFile: certificateKeyFile,
                                names: .service(environment: "sandbox"))
                        ))
                } else {
                    throw APNsConfigurationError("incomplete APNs credentials")
                }
            } catch {
                throw ConfigurationError(
                    setting: "ENRICH_APNS_*", value: "", allowed: "readable APNs credentials",
                    problem: error.description)
            }
        }
        for credential in (apps?.credentials.values.sorted { $0.name < $1.name } ?? []) {
            let users = apps?.apps.filter { $0.credential == credential.name }.map(\.id) ?? []
            if credential.isFirebase { continue }
            do throws(APNsConfigurationError) {
                switch credential.method {
                case .firebase: continue
                case .token(let keyFile, let keyID, let teamID):
                    credentials.append(
                        (credential.name, try APNsCredentialFiles.token(keyFile: keyFile, keyID: keyID, teamID: teamID))
                    )
                case .certificate(let certificateFile, let keyFile):
                    credentials.append(
                        (
                            credential.name,
                            try APNsCredentialFiles.certificate(
                                certFile: certificateFile, keyFile: keyFile, names: .appsFile)
                        ))
                case .pkcs12(let file, let variable):
                    if let variable, ProcessInfo.processInfo.environment[variable] == nil {
                        throw APNsConfigurationError(
                            "the .p12 password variable \(variable) (p12_password_env) is not set in the environment")
                    }
                    let password = variable.flatMap { ProcessInfo.processInfo.environment[$0] } ?? ""
                    credentials.append(
                        (
                            credential.name,
                            try APNsCredentialFiles.pkcs12(
                                file: file, password: password, passwordSource: variable ?? "(no p12_password_env)")
                        ))
                }
            } catch {
                throw ConfigurationError(
                    setting: "ENRICH_APPS_FILE", value: apps?.path ?? "",
                    allowed: "readable credentials for every app",
                    problem:
                        "credential '\(credential.name)' (used by \(users.isEmpty ? "no app" : "app " + users.joined(separator: ", "))): \(error.description)"
                )
            }
        }
        return LoadedCredentials(credentials: credentials, trust: trust, fcmAccounts: fcmAccounts, fcmTrust: fcmTrust)
    }
}

/// The credentials read at start-up, by name, and the extra trust roots (PEM).
struct LoadedCredentials {
    var credentials: [(String, APNsCredentials)]
    var trust: String?
    /// Where a service account's identity is kept in `identities` (apart from an APNs credential of the same name:
    /// both single-app credentials are called `default`).
    static func fcmIdentityKey(_ name: String) -> String { "fcm:" + name }

    /// FCM service accounts by credential name (`default`: ENRICH_FCM_SERVICE_ACCOUNT_FILE).
    var fcmAccounts: [(String, FCMServiceAccount)] = []
    /// Extra trust roots for FCM (PEM; ENRICH_FCM_CA).
    var fcmTrust: String? = nil

    /// Who each credential is to APNs, by name: `team TEAM123456, key ABC1234567` for a `.p8` key, `certificate`
    /// otherwise (ids only, never the key).
    var identities: [String: String] {
        var identities: [String: String] = [:]
        for (name, credential) in credentials {
            switch credential {
            case .token(let manager): identities[name] = "team \(manager.teamID), key \(manager.keyID)"
            case .certificate: identities[name] = "certificate"
            }
        }
        for (name, account) in fcmAccounts {
            identities[Self.fcmIdentityKey(name)] = "service account \(account.clientEmail)"
        }
        return identities
    }
}

extension APNsSettingNames {
    /// The apps file's members, for a certificate declared there.
    static let appsFile = APNsSettingNames(
        host: "ENRICH_APNS_SANDBOX_URL / ENRICH_APNS_PRODUCTION_URL", trust: "ENRICH_APNS_CA",
        certificate: "cert_file", certificateKey: "cert_key_file", pkcs12: "p12_file",
        tokenKey: "key_file (with key_id and team_id)")
}
