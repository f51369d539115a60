import Essentials
import FCMCore
import Foundation

// FCM's service accounts are read here, once at start-up, like the APNs credentials: a file that cannot be used
// stops the start with a message that names it and the apps that use it (never the key).
extension DeliverySettings {
    /// Every configured service account by credential name (`default` for ENRICH_FCM_SERVICE_ACCOUNT_FILE), and
    /// the extra trust roots (ENRICH_FCM_CA).
    func loadFCMAccounts() throws(ConfigurationError) -> ([(String, FCMServiceAccount)], String?) {
        var accounts: [(String, FCMServiceAccount)] = []
        if let file = fcmServiceAccountFile {
            accounts.append(
                (
                    SenderKey.defaultCredential,
                    try Self.readAccount(file, setting: "ENRICH_FCM_SERVICE_ACCOUNT_FILE", value: file)
                ))
        }
        for credential in (apps?.credentials.values.sorted { $0.name < $1.name } ?? []) {
            guard case .firebase(let file) = credential.method else { continue }
            let users = apps?.apps.filter { $0.fcmCredential == credential.name }.map(\.id) ?? []
            do {
                accounts.append((credential.name, try Self.readAccount(file, setting: "", value: "")))
            } catch {
                throw ConfigurationError(
                    setting: "ENRICH_APPS_FILE", value: apps?.path ?? "", allowed: "readable credentials for every app",
                    problem:
                        "credential '\(credential.name)' (used by \(users.isEmpty ? "no app" : "app " + users.joined(separator: ", "))): \(error.problem ?? "")"
                )
            }
        }
        var trust: String?
        if let fcmCAFile {
            guard
                let pem = FileManager.default.contents(atPath: fcmCAFile).map({ String(decoding: $0, as: UTF8.self) }),
                pem.contains("BEGIN CERTIFICATE")
            else {
                throw ConfigurationError(
                    setting: "ENRICH_FCM_CA", value: fcmCAFile, allowed: "a readable PEM CA certificate file")
            }
            trust = pem
        }
        return (accounts, trust)
    }

    private static func readAccount(_ file: String, setting: String, value: String) throws(ConfigurationError)
        -> FCMServiceAccount
    {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ConfigurationError(
                setting: setting, value: value, allowed: "a readable service-account key file (JSON)",
                problem: "cannot read '\(file)'")
        }
        do { return try FCMServiceAccount(json: data) } catch {
            throw ConfigurationError(
                setting: setting, value: value, allowed: "a Google service-account key file (JSON)",
                problem: "'\(file)': \(error.message)")
        }
    }
}
