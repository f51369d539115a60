import APNsCore
import ArgumentParser
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Testing

@testable import push_sender

/// Parsing and validation of push-sender's commands in-process (no binary spawned).
@Suite("push-sender argument parsing (parseAsRoot)")
struct PushSenderParseTests {
    static let auth = ["--key", "k.p8", "--key-id", "KEYID12345", "--team-id", "TEAMID6789"]
    static let token = String(repeating: "ab", count: 32)

    /// The message ArgumentParser would print for `arguments`, or nil when they parse and validate.
    func refusal(_ arguments: [String]) -> String? {
        do {
            _ = try PushSender.parseAsRoot(arguments)
            return nil
        } catch {
            return PushSender.message(for: error)
        }
    }

    @Test("send: a well-formed command parses into its options")
    func sendParses() throws {
        let command = try PushSender.parseAsRoot(
            [
                "send", "--topic", "com.example.app", "--payload", "p.json", "--token", Self.token, "--connections",
                "4",
                "--concurrency", "100", "--push-type", "background", "--priority", "5",
            ] + Self.auth)
        let send = try #require(command as? Send)
        #expect(send.connection.connections == 4)
        #expect(send.connection.concurrency == 100)
        #expect(send.headers.pushType == "background")
        #expect(send.headers.priority == 5)
        #expect(try send.tokens.entries().map(\.token) == [Self.token])
    }

    @Test("header flags are held to the rules the service applies: topic, collapse id, expiration, apns-id")
    func headerFlags() throws {
        let base = ["send", "--payload", "p.json", "--token", Self.token] + Self.auth
        func refused(_ flags: [String]) -> String? { refusal(base + flags) }
        #expect(refused(["--topic", "com.example.app"]) == nil)
        #expect(refused(["--topic", String(repeating: "a", count: 255)]) == nil)
        #expect(refused(["--topic", String(repeating: "a", count: 256)])?.contains("--topic is 256 bytes") == true)
        #expect(refused(["--topic", "com.example app"])?.contains("--topic") == true)
        #expect(refused(["--topic", "com.example\napp"])?.contains("--topic") == true)
        // The suffix of the push type counts: 250 characters plus ".voip" fit, 251 do not.
        #expect(refused(["--topic", String(repeating: "a", count: 250), "--push-type", "voip"]) == nil)
        #expect(
            refused(["--topic", String(repeating: "a", count: 251), "--push-type", "voip"])?.contains("--topic")
                == true)
        let topic = ["--topic", "com.example.app"]
        #expect(refused(topic + ["--collapse-id", String(repeating: "c", count: 64)]) == nil)
        #expect(
            refused(topic + ["--collapse-id", String(repeating: "c", count: 65)])?.contains("--collapse-id") == true)
        #expect(refused(topic + ["--collapse-id", "a\r\nb"])?.contains("--collapse-id") == true)
        #expect(refused(topic + ["--expiration", "0"]) == nil)
        #expect(refused(topic + ["--expiration", "-1"])?.contains("--expiration") == true)
        #expect(refused(topic + ["--expiration", "soon"])?.contains("--expiration") == true)
        #expect(refused(topic + ["--apns-id", "123e4567-e89b-12d3-a456-426614174000"]) == nil)
        #expect(refused(topic + ["--apns-id", "1234"])?.contains("--apns-id") == true)
    }

    @Test("background without --priority sends priority 5; an explicit priority is kept")
    func backgroundPriority() throws {
        let base = ["send", "--topic", "t", "--payload", "p.json", "--token", Self.token] + Self.auth
        let background = try #require(try PushSender.parseAsRoot(base + ["--push-type", "background"]) as? Send)
        #expect(background.headers.effectivePriority == .considerate)
        let alert = try #require(try PushSender.parseAsRoot(base) as? Send)
        #expect(alert.headers.effectivePriority == nil)
        let explicit = try #require(try PushSender.parseAsRoot(base + ["--priority", "1"]) as? Send)
        #expect(explicit.headers.effectivePriority == .low)
    }

    @Test("token lines: TOKEN, TOKEN # note, TOKEN {json}; a broken payload fails its line only")
    func tokenLines() throws {
        func entry(_ line: String) -> TokenOptions.Entry? { TokenOptions.entry(Array(line.utf8)[...]) }
        #expect(entry("  # comment") == nil)
        #expect(entry("") == nil)
        #expect(entry("abc  # note")?.token == "abc")
        let withPayload = try #require(entry(#"abc {"aps":{"alert":"hi"}}"#))
        #expect(withPayload.token == "abc")
        #expect(withPayload.payload?["aps"]?["alert"]?.stringValue == "hi")
        #expect(withPayload.problem == nil)
        let broken = try #require(entry("abc {not json"))
        #expect(broken.token == "abc")
        #expect(broken.payload == nil)
        #expect(broken.problem?.contains("not valid JSON") == true)
        #expect(entry("abc [1]")?.problem?.contains("only a {json} payload") == true)
        #expect(entry("abc {}")?.payload == .object([:]))
    }

    @Test("send: conflicting or incomplete options are refused with what to do")
    func sendRefusals() {
        let base = ["send", "--topic", "t", "--payload", "p.json", "--token", Self.token]
        #expect(
            refusal(base + ["--sandbox", "--production"] + Self.auth)?.contains(
                "choose one of --sandbox, --production or --host") == true)
        #expect(refusal(base + ["--host", "http://127.0.0.1:1"] + Self.auth)?.contains("https://") == true)
        #expect(refusal(base + ["--connections", "0"] + Self.auth)?.contains("--connections must be 1 to 64") == true)
        #expect(refusal(base + ["--attempts", "11"] + Self.auth)?.contains("--attempts must be 1 to 10") == true)
        #expect(refusal(base + ["--key", "k.p8"])?.contains("needs all of --key") == true)
        #expect(refusal(base + ["--push-type", "weird"] + Self.auth)?.contains("is not one of") == true)
        #expect(
            refusal(base + ["--push-type", "background", "--priority", "10"] + Self.auth)?.contains("--priority 5")
                == true)
    }

    @Test("simulate: the device id and the server URL are checked before anything runs")
    func simulateRefusals() {
        #expect(refusal(["simulate", "p.json", "--device", ""]) != nil)
        #expect(
            refusal(["simulate", "p.json", "--device", "d1", "--server", "localhost:8080"])?.contains("http(s) URL")
                == true)
        #expect(refusal(["simulate", "p.json", "--device", "d1"]) == nil)
    }

    @Test("simulate in-process reads every ENRICH_* setting, with --db and --mode over them")
    func simulateConfiguration() throws {
        let command = try #require(
            try PushSender.parseAsRoot(["simulate", "p.json", "--device", "d1", "--db", "x.sqlite"]) as? Simulate)
        let configuration = try command.configuration(environment: [
            "ENRICH_BODY_TEMPLATE": "Hey {{name}}", "ENRICH_STALENESS_WINDOW": "10", "ENRICH_DB": "ignored.sqlite",
            "ENRICH_MODE": "woosmap",
        ])
        #expect(configuration.bodyTemplate == "Hey {{name}}")
        #expect(configuration.stalenessWindow == 10)
        #expect(configuration.databasePath == "x.sqlite")
        #expect(configuration.mode == .woosmap)
        let withMode = try #require(
            try PushSender.parseAsRoot(["simulate", "p.json", "--device", "d1", "--mode", "default"]) as? Simulate)
        #expect(try withMode.configuration(environment: ["ENRICH_MODE": "woosmap"]).mode == .default)
        #expect(throws: ValidationError.self) {
            try withMode.configuration(environment: ["ENRICH_STALENESS_WINDOW": "-1"])
        }
    }

    @Test("--version prints the project version")
    func version() {
        #expect(refusal(["--version"]) == BuildInfo.version)
    }
}
