import ArgumentParser
import FCMCore
import Foundation

/// `send --fcm`: where Android pushes go and with which service account.
struct FCMOptions: ParsableArguments {
    @Flag(help: "Send to Android devices through FCM HTTP v1 (tokens are FCM registration tokens).") var fcm = false
    @Option(
        help: "The Firebase service-account key file (JSON; default: GOOGLE_APPLICATION_CREDENTIALS) for --fcm.")
    var serviceAccount: String?
    @Option(help: "FCM's base URL (a local FCM's, e.g. https://127.0.0.1:8443, for tests and demos).") var fcmUrl =
        "https://fcm.googleapis.com"
    @Flag(help: "With --fcm: a data-only message (title, subtitle, body and custom keys in data; nothing shown).")
    var dataOnly = false
    @Flag(help: "With --fcm: FCM checks every message (validate_only) and delivers none.") var validateOnly = false

    func validate() throws {
        guard fcm else {
            if serviceAccount != nil || dataOnly || validateOnly {
                throw ValidationError("--service-account, --data-only and --validate-only go with --fcm")
            }
            return
        }
        if !fcmUrl.hasPrefix("https://") { throw ValidationError("--fcm-url must be an https:// URL") }
        if accountFile == nil {
            throw ValidationError(
                "--fcm needs --service-account FILE (Firebase console: Project settings > Service accounts > "
                    + "Generate new private key), or GOOGLE_APPLICATION_CREDENTIALS")
        }
    }

    var accountFile: String? {
        serviceAccount
            ?? ProcessInfo.processInfo.environment["GOOGLE_APPLICATION_CREDENTIALS"].flatMap {
                $0.isEmpty ? nil : $0
            }
    }

    /// The service account, read and checked (a problem names the file, never the key).
    func account() throws -> FCMServiceAccount {
        guard let file = accountFile, let data = FileManager.default.contents(atPath: file) else {
            throw ValidationError("cannot read the service-account file '\(accountFile ?? "")'")
        }
        do { return try FCMServiceAccount(json: data) } catch {
            throw ValidationError("the service-account file '\(file)': \(error.message)")
        }
    }
}
