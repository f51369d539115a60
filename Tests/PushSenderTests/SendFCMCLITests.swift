import Essentials
import FCMCore
import Foundation
import MockFCM
import TestSupport
import Testing

/// A folder with the local FCM's service account and CA as files, for the executable.
private func fcmFiles(base: String) throws -> (directory: URL, account: String, ca: String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("send-fcm-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let account = directory.appendingPathComponent("service-account.json").path
    let ca = directory.appendingPathComponent("ca.pem").path
    try Data(fcmAccount(base: base).json).write(to: URL(fileURLWithPath: account))
    try Data(localCAPEM.utf8).write(to: URL(fileURLWithPath: ca))
    return (directory, account, ca)
}

@Suite("push-sender send --fcm and mock-fcm")
struct SendFCMCLITests {
    @Test("send --fcm: results per token, FCM's reasons, a refused token locally, exit 1 when one failed")
    func sendsToLocalFCM() async throws {
        try await withMockFCM { base, state in
            let files = try fcmFiles(base: base)
            defer { try? FileManager.default.removeItem(at: files.directory) }
            state.script(fcmToken(2), MockFCMScript(errorCode: .unregistered))
            let common = [
                "send", "--fcm", "--service-account", files.account, "--fcm-url", base, "--ca", files.ca,
                "--payload", "payloads/location.json", "--priority", "10", "--collapse-id", "c1",
            ]
            let table = try runPushSender(
                common + ["--token", fcmToken(1), "--token", fcmToken(2), "--token", "not a token"])
            #expect(table.status == 1, "\(table.out) \(table.err)")
            #expect(table.out.contains("MESSAGE"))
            #expect(table.out.contains("UNREGISTERED"))
            #expect(table.out.contains("projects/demo-project/messages/"))
            #expect(table.out.contains("letters, digits, '-', '_' and ':'"))
            #expect(table.out.contains("1 of 3 accepted, 2 failed"))
            let sent = try #require(state.received.first { $0.token == fcmToken(1) })
            #expect(sent.message["android"]?["priority"] == .string("HIGH"))
            #expect(sent.message["android"]?["collapse_key"] == .string("c1"))
            #expect(sent.message["notification"]?["title"] == .string("Nearby"))

            let json = try runPushSender(common + ["--token", fcmToken(3), "--json"])
            #expect(json.status == 0, "\(json.err)")
            let line = try JSONParser.parse(Array(json.out.split(separator: "\n")[0].utf8))
            #expect(line["ok"] == .bool(true))
            #expect(line["name"]?.stringValue?.hasPrefix("projects/demo-project/messages/") == true)
            #expect(line["apns_id"] == nil)
        }
    }

    @Test("--validate-only: FCM checks and delivers nothing; --dry-run sends nothing at all")
    func validateAndDryRun() async throws {
        try await withMockFCM { base, state in
            let files = try fcmFiles(base: base)
            defer { try? FileManager.default.removeItem(at: files.directory) }
            let common = [
                "send", "--fcm", "--service-account", files.account, "--fcm-url", base, "--ca", files.ca,
                "--payload", "payloads/location.json", "--token", fcmToken(1),
            ]
            let validated = try runPushSender(common + ["--validate-only"])
            #expect(validated.status == 0, "\(validated.err)")
            #expect(state.received.first?.validateOnly == true)
            #expect(state.counts.accepted == 0)
            let dry = try runPushSender(common + ["--dry-run"])
            #expect(dry.status == 0)
            #expect(dry.out.contains("1 of 1 tokens can be sent; nothing was sent"))
            #expect(state.counts.messages == 1)
        }
    }

    @Test("send --fcm without a service account says how to get one")
    func missingAccount() throws {
        let result = try runPushSender(
            ["send", "--fcm", "--payload", "payloads/location.json", "--token", fcmToken(1)], environment: [:])
        #expect(result.status == 64)
        #expect(result.err.contains("Generate new private key"))
    }

    @Test("mock-fcm as a process: writes a service account and CA that send --fcm uses as they are")
    func mockFCMProcess() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mock-fcm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let process = Process()
        process.executableURL = try #require(builtExecutable(named: "push-sender"))
        process.arguments = [
            "mock-fcm", "--port", "0", "--certs-out", directory.path, "--account-out",
            directory.appendingPathComponent("sa.json").path, "--log-level", "error",
        ]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var text = ""
        for _ in 0..<200 where !text.contains("listening on") {
            text += String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
            try await Task.sleep(for: .milliseconds(50))
        }
        let url = try #require(
            text.split(separator: "\n").first { $0.contains("listening on") }?.split(separator: " ")
                .first { $0.hasPrefix("https://") })
        let account = try FCMServiceAccount(
            json: try #require(FileManager.default.contents(atPath: directory.appendingPathComponent("sa.json").path)))
        #expect(account.tokenURI == "\(url)/token")
        let sent = try runPushSender([
            "send", "--fcm", "--service-account", directory.appendingPathComponent("sa.json").path, "--fcm-url",
            String(url), "--ca", directory.appendingPathComponent("ca.pem").path, "--payload", "payloads/location.json",
            "--token", fcmToken(7),
        ])
        #expect(sent.status == 0, "\(sent.out) \(sent.err)")
        #expect(sent.out.contains("1 of 1 accepted"))
    }
}
