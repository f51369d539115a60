import APNsClient
import APNsCore
import EnrichmentCore
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Runs the real `push-sender` executable built next to the test bundle.
func runPushSender(
    _ arguments: [String], stdin: String? = nil, in directory: URL = repositoryRoot,
    environment: [String: String]? = nil
) throws -> (status: Int32, out: String, err: String) {
    let process = Process()
    let executable = try #require(builtExecutable(named: "push-sender"), "push-sender must be built next to the tests")
    process.executableURL = executable
    process.arguments = arguments
    process.currentDirectoryURL = directory
    if let environment { process.environment = environment }
    let out = Pipe()
    let err = Pipe()
    let input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (
        process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self)
    )
}

@Suite("push-sender command line")
struct PushSenderCLITests {
    @Test("check: exit 0 fresh, 1 stale, 2 no timestamp, 3 invalid; the sample payloads behave as documented")
    func checkExitCodes() throws {
        let now = Int(Date().timeIntervalSince1970)
        #expect(try runPushSender(["check", "payloads/location.json"]).status == 0)
        #expect(try runPushSender(["check", "payloads/location.json", "--now", String(now + 400)]).status == 1)
        #expect(try runPushSender(["check", "payloads/stale.json"]).status == 1)
        #expect(try runPushSender(["check", "payloads/missing-timestamp.json"]).status == 2)
        #expect(try runPushSender(["check", "payloads/legacy-location.json", "--mode", "woosmap"]).status == 2)
        #expect(try runPushSender(["check", "payloads/legacy-location.json"]).status == 0)
        #expect(try runPushSender(["check", "-"], stdin: "{not json").status == 3)
        let json = try runPushSender(["check", "payloads/stale.json", "--json", "--now", "1589288655"])
        #expect(json.out.contains(#""state":"stale""#))
        #expect(json.out.contains(#""age_seconds":301"#))
    }

    @Test("check survives the timestamps that once crashed it, and refuses a --now out of range")
    func checkExtremes() throws {
        for timestamp in ["-9223372036854775808", "9223372036854775807"] {
            let result = try runPushSender(["check", "-", "--json"], stdin: #"{"aps":{"timestamp":\#(timestamp)}}"#)
            #expect(result.status == (timestamp.hasPrefix("-") ? 1 : 0), "\(timestamp): \(result.err)")
            #expect(result.out.contains(#""timestamp":\#(timestamp)"#))
        }
        let legacy = try runPushSender(["check", "-"], stdin: #"{"timestamp":"1e300"}"#)
        #expect(legacy.status == 2)
        for now in ["1e300", "-1", "253402300800"] {
            let refused = try runPushSender(["check", "payloads/location.json", "--now=\(now)"])
            #expect(refused.status == 64, "--now \(now)")
            #expect(refused.err.contains("253402300799"))
        }
    }

    @Test("an ill-formed line in --tokens-file fails that token only")
    func tokensFileWithBadBytes() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tokens-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: file) }
        var bytes = Array((String(repeating: "ab", count: 32) + "\n").utf8)
        bytes += [0xFF, 0xFE, 0x41, 0x0A]
        bytes += Array((String(repeating: "cd", count: 32) + "\n").utf8)
        try Data(bytes).write(to: file)
        let result = try runPushSender([
            "send", "--dry-run", "--topic", "com.example.app", "--payload", "payloads/location.json",
            "--tokens-file", file.path,
        ])
        #expect(result.out.contains("2 of 3 tokens are well-formed"), "\(result.out) \(result.err)")
    }

    @Test("send --dry-run: byte-exact size check and header rules without a server")
    func dryRun() throws {
        let token = String(repeating: "ab", count: 32)
        let oversize = try runPushSender([
            "send", "--dry-run", "--topic", "com.example.app", "--payload", "payloads/oversize.json", "--token", token,
        ])
        #expect(oversize.status == 1)
        #expect(oversize.err.contains("PayloadTooLarge"))
        let ok = try runPushSender([
            "send", "--dry-run", "--topic", "com.example.app", "--payload", "payloads/location.json", "--token", token,
        ])
        #expect(ok.status == 0)
        #expect(ok.out.contains("1 of 1 tokens are well-formed"))
        let background = try runPushSender([
            "send", "--dry-run", "--topic", "a.b", "--push-type", "background", "--priority", "10",
            "--payload", "payloads/background.json", "--token", token,
        ])
        #expect(background.status == 64)
        #expect(background.err.contains("background pushes need --priority 5"))
        let liveActivity = try runPushSender([
            "send", "--dry-run", "--topic", "a.b", "--push-type", "liveactivity", "--priority", "1",
            "--payload", "payloads/background.json", "--token", token,
        ])
        #expect(liveActivity.status == 64)
        #expect(liveActivity.err.contains("liveactivity pushes need --priority 10 or 5"), "\(liveActivity.err)")
    }

    @Test("send --tokens-file: streamed; over 1,000 pushes the table lists the failures and counts the rest")
    func largeTokensFile() async throws {
        try await withMock { base, state in
            let directory = try CredentialFiles()
            defer { directory.remove() }
            let tokens = (0..<1_200).map { String(format: "%064x", 0xF0_0000 + $0) }
            let file = directory.url.appendingPathComponent("tokens.txt")
            try (tokens.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
            for bad in [tokens[10], tokens[1_100]] {
                state.script(FailureScript(status: 400, reason: "BadDeviceToken"), for: bad)
            }
            let common = [
                "send", "--host", base, "--ca", directory.ca, "--key", directory.key, "--key-id", "KEYID12345",
                "--team-id", "TEAMID6789", "--topic", "com.example.app", "--payload", "payloads/location.json",
                "--tokens-file", file.path, "--attempts", "1",
            ]
            let table = try runPushSender(common)
            #expect(table.status == 1)
            #expect(table.out.contains("BadDeviceToken"))
            #expect(table.out.contains("1198 accepted pushes not listed"), "\(table.out.suffix(600))")
            #expect(table.out.contains("1198 of 1200 accepted, 2 failed"))
            // Only the two failures have rows (the header aside): no row per success.
            #expect(table.out.split(separator: "\n").filter { $0.contains("BadDeviceToken") }.count == 2)
            #expect(table.out.split(separator: "\n").count < 20, "\(table.out.prefix(800))")
            #expect(state.receivedCount == 1_200)

            let lines = try runPushSender(common + ["--json"])
            let results = lines.out.split(separator: "\n")
            #expect(results.count == 1_200)
            #expect(results.filter { $0.contains(#""ok":false"#) }.count == 2)
        }
    }

    @Test("send: TOKEN {json} lines from stdin, the topic from an .apns file (never sent), JSON Lines and a summary")
    func sendFromStandardInput() async throws {
        try await withMock { base, state in
            let directory = try CredentialFiles()
            defer { directory.remove() }
            let (key, ca) = (directory.key, directory.ca)
            let apns = directory.url.appendingPathComponent("push.apns").path
            try Data(#"{"Simulator Target Bundle":"com.example.sim","aps":{"alert":"shared"}}"#.utf8)
                .write(to: URL(fileURLWithPath: apns))
            let (first, second, third) = (
                String(repeating: "a", count: 64), String(repeating: "b", count: 64), String(repeating: "c", count: 64)
            )
            let lines = "\(first)\n# a comment\n\(second) {\"aps\":{\"alert\":\"own\"}}\n\(third) {broken\n"
            let common = [
                "send", "--host", base, "--ca", ca, "--key", key, "--key-id", "KEYID12345", "--team-id", "TEAMID6789",
                "--payload", apns, "--tokens-file", "-",
            ]
            let run = try runPushSender(common + ["--json"], stdin: lines)
            #expect(run.status == 1)
            let results = try run.out.split(separator: "\n").map { try JSONParser.parse(Array($0.utf8)) }
            #expect(results.count == 3)
            let byIndex = Dictionary(
                uniqueKeysWithValues: results.map { result -> (Int64, JSONValue) in
                    if case .int(let index)? = result["index"] { return (index, result) }
                    return (-1, result)
                })
            #expect(byIndex[0]?["ok"] == .bool(true))
            #expect(byIndex[1]?["ok"] == .bool(true))
            #expect(byIndex[2]?["error"]?.stringValue?.contains("not valid JSON") == true)
            #expect(run.err.contains("2 of 3 accepted, 1 failed"))
            #expect(run.err.contains("pushes/s"))
            let pushes = state.receivedPushes
            #expect(pushes.count == 2)
            #expect(pushes.allSatisfy { $0.topic == "com.example.sim" })
            let payloads = Dictionary(uniqueKeysWithValues: pushes.map { ($0.deviceToken, $0.payload) })
            let shared = try JSONParser.parse(try #require(payloads[first]))
            #expect(shared["aps"]?["alert"]?.stringValue == "shared")
            #expect(shared["Simulator Target Bundle"] == nil)
            #expect(try JSONParser.parse(try #require(payloads[second]))["aps"]?["alert"]?.stringValue == "own")

            // Human output with --failures-only lists the failed line only, then the summary.
            let human = try runPushSender(common + ["--failures-only"], stdin: lines)
            #expect(human.status == 1)
            #expect(human.out.contains("cccccccc"))
            #expect(!human.out.contains("aaaaaaaa"))
            #expect(human.out.contains("2 of 3 accepted, 1 failed"))
        }
    }

    @Test("send --tokens-file -: a line's push goes out while standard input is still open")
    func streamsStandardInput() async throws {
        try await withMock { base, state in
            let directory = try CredentialFiles()
            defer { directory.remove() }
            let (key, ca) = (directory.key, directory.ca)
            let process = Process()
            let sender: URL = try #require(builtExecutable(named: "push-sender"))
            process.executableURL = sender
            process.arguments = [
                "send", "--host", base, "--ca", ca, "--key", key, "--key-id", "KEYID12345", "--team-id",
                "TEAMID6789", "--topic", "com.example.app", "--tokens-file", "-", "--json",
            ]
            let input = Pipe()
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let first = String(repeating: "1", count: 64)
            input.fileHandleForWriting.write(Data("\(first) {\"aps\":{\"alert\":\"one\"}}\n".utf8))
            // The first result line arrives while stdin is still open.
            let line = try await blockingRead(output.fileHandleForReading)
            #expect(line.contains(first))
            #expect(line.contains(#""ok":true"#))
            #expect(state.receivedCount == 1)
            let second = String(repeating: "2", count: 64)
            input.fileHandleForWriting.write(Data("\(second) {\"aps\":{\"alert\":\"two\"}}\n".utf8))
            try input.fileHandleForWriting.close()
            let rest = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            #expect(rest.contains(second))
            #expect(state.receivedPushes.map(\.deviceToken) == [first, second])
        }
    }
}

/// Reads what is available (one line, here) on a thread of its own, so the test's tasks are not blocked.
private func blockingRead(_ handle: FileHandle) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            continuation.resume(returning: String(decoding: handle.availableData, as: UTF8.self))
        }.start()
    }
}

/// The test signing key (.p8) and the mock's CA in a scratch folder, for running the executable against the mock.
struct CredentialFiles {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
    var key: String { url.appendingPathComponent("AuthKey.p8").path }
    var ca: String { url.appendingPathComponent("ca.pem").path }

    init() throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        try Data(signingKeyPEM.utf8).write(to: URL(fileURLWithPath: key))
        try Data(authority.caCertificatePEM.utf8).write(to: URL(fileURLWithPath: ca))
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}
