import APNsCore
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    @Test("environment values are validated with the setting name and what is allowed")
    func invalidValues() {
        var configuration = ServiceConfiguration()
        #expect(
            throws: ConfigurationError(
                setting: "ENRICH_PORT", value: "http", allowed: "an integer port 0-65535 (0 picks a free port)")
        ) {
            try configuration.apply(environment: ["ENRICH_PORT": "http"])
        }
        #expect(throws: ConfigurationError.self) { try configuration.apply(environment: ["ENRICH_MODE": "fancy"]) }
        #expect(throws: ConfigurationError.self) { try configuration.apply(environment: ["ENRICH_DEADLINE": "-1"]) }
    }

    @Test("channel and broadcast hosts follow moved push hosts; Apple's by default; as set when set")
    func channelHostsFollowPushHosts() throws {
        var apple = ServiceConfiguration()
        try apple.apply(environment: [:])
        #expect(apple.delivery.channelsURL(for: .sandbox) == "https://api-manage-broadcast.sandbox.push.apple.com:2195")
        #expect(apple.delivery.channelsURL(for: .production) == "https://api-manage-broadcast.push.apple.com:2196")
        #expect(apple.delivery.broadcastURL(for: .production) == "https://api.push.apple.com")
        var mock = ServiceConfiguration()
        try mock.apply(environment: [
            "ENRICH_APNS_SANDBOX_URL": "https://127.0.0.1:2197", "ENRICH_APNS_PRODUCTION_URL": "https://127.0.0.1:2198",
        ])
        #expect(mock.delivery.channelsURL(for: .sandbox) == "https://127.0.0.1:2197")
        #expect(mock.delivery.broadcastURL(for: .sandbox) == "https://127.0.0.1:2197")
        #expect(mock.delivery.channelsURL(for: .production) == "https://127.0.0.1:2198")
        #expect(mock.delivery.broadcastURL(for: .production) == "https://127.0.0.1:2198")
        var set = ServiceConfiguration()
        try set.apply(environment: [
            "ENRICH_APNS_SANDBOX_URL": "https://127.0.0.1:2197",
            "ENRICH_APNS_CHANNELS_SANDBOX_URL": "https://127.0.0.1:3000",
        ])
        #expect(set.delivery.channelsURL(for: .sandbox) == "https://127.0.0.1:3000")
    }

    @Test("URLs the service calls are refused at start when a client would trap on them (port over 65535)")
    func outboundURLSettings() {
        for (variable, value) in [
            ("ENRICH_FEEDBACK_URL", "http://127.0.0.1:99999/feedback"),
            ("ENRICH_LOCATION_WEBHOOK_URL", "http://127.0.0.1:0/events"),
            ("ENRICH_APNS_SANDBOX_URL", "https://127.0.0.1:70000"),
            ("ENRICH_FEEDBACK_URL", "http://127.0.0.1/a b"),
        ] {
            var configuration = ServiceConfiguration()
            #expect(throws: ConfigurationError.self, "\(variable)=\(value)") {
                try configuration.apply(environment: [variable: value])
            }
        }
    }

    @Test("secrets never appear in errors or the start-up summary")
    func secretsRedacted() throws {
        var configuration = ServiceConfiguration()
        try configuration.apply(environment: [
            "ENRICH_MAP_KEY": "AIzaSECRET", "ENRICH_API_KEY": "tok-SECRET", "ENRICH_PORT": "9090",
        ])
        #expect(configuration.port == 9090)
        #expect(configuration.mapKey == "AIzaSECRET")
        #expect(!configuration.redactedSummary.contains("SECRET"))
        #expect(configuration.redactedSummary.contains("map_key=set"))
        configuration.places = .woosmap
        configuration.woosmapBaseURL = "https://api.woosmap.com"
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }
}

@Suite("Settings table: one declaration per setting")
struct SettingsTableTests {
    @Test("every setting has a distinct flag and variable, help, a default, and secrets have no flag")
    func tableIsComplete() {
        let settings = ServiceConfiguration.settings.settings
        #expect(Set(settings.map(\.name)).count == settings.count)
        #expect(Set(settings.map(\.variable)).count == settings.count)
        #expect(
            settings.allSatisfy { $0.variable.hasPrefix("ENRICH_") && !$0.help.isEmpty && !$0.defaultValue.isEmpty })
        #expect(
            Set(ServiceConfiguration.secretVariables) == [
                "ENRICH_WOOSMAP_KEY", "ENRICH_MAP_KEY", "ENRICH_MAP_SIGNING_SECRET", "ENRICH_API_KEY",
                "ENRICH_APNS_P12_PASSWORD", "ENRICH_DATABASE_URL", "ENRICH_PUSH_CALLBACK_SECRET",
            ])
        let help = ServiceConfiguration.settings.helpText
        #expect(help.contains("--port <port>"))
        #expect(help.contains("ENRICH_API_KEY=<key>"))
        #expect(!help.contains("--api-key"))
    }

    @Test("flags are parsed with their types, win over variables, and errors name the flag as typed")
    func flagsOverVariables() throws {
        var configuration = ServiceConfiguration()
        try configuration.apply(environment: ["ENRICH_PORT": "9000", "ENRICH_STALENESS_WINDOW": "10"])
        try configuration.apply(arguments: [
            "--port", "9090", "--staleness-window=60", "--max-future-skew", "off",
            "--places-types", "cafe, bar", "--idle-timeout", "1.5",
        ])
        #expect(configuration.port == 9090)
        #expect(configuration.stalenessWindow == 60)
        #expect(configuration.maxFutureSkew == nil)
        #expect(configuration.placesTypes == ["cafe", "bar"])
        #expect(configuration.connections.idleTimeout == .milliseconds(1500))

        #expect(
            throws: ConfigurationError(
                setting: "--port", value: "abc", allowed: "an integer port 0-65535 (0 picks a free port)")
        ) {
            try configuration.apply(arguments: ["--port", "abc"])
        }
        do throws(ConfigurationError) {
            try configuration.apply(arguments: ["--port", "abc"])
        } catch {
            #expect(
                error.description == "--port 'abc' is not valid: expected an integer port 0-65535 (0 picks a free port)"
            )
        }
        do throws(ConfigurationError) {
            try configuration.apply(environment: ["ENRICH_PORT": "abc"])
        } catch {
            #expect(error.description.hasPrefix("ENRICH_PORT='abc' is not valid"))
        }
    }

    @Test("unknown flags, missing values and secrets as flags are refused with what to do")
    func badFlags() {
        var configuration = ServiceConfiguration()
        func message(_ arguments: [String]) -> String? {
            do throws(ConfigurationError) {
                try configuration.apply(arguments: arguments)
                return nil
            } catch { return error.description }
        }
        #expect(message(["--prot", "1"])?.contains("did you mean --port?") == true)
        #expect(message(["--port"])?.contains("needs a value") == true)
        let secret = message(["--api-key", "s3cret"])
        #expect(secret?.contains("ENRICH_API_KEY in the environment") == true)
        #expect(secret?.contains("s3cret") == false)
        // The database URL may carry a password: a flag would show it in ps.
        let database = message(["--database-url", "postgres://u:pw-SECRET@h/db"])
        #expect(database?.contains("ENRICH_DATABASE_URL in the environment") == true)
        #expect(database?.contains("pw-SECRET") == false)
        #expect(message(["stray"])?.contains("unexpected argument") == true)
        #expect(message(["--sample-pois", "maybe"])?.contains("true or false") == true)
    }

    @Test("a secret with a bad value is never echoed")
    func secretNotEchoed() {
        var configuration = ServiceConfiguration()
        do throws(ConfigurationError) {
            try configuration.apply(environment: ["ENRICH_MAP_KEY": " "])
            Issue.record("a blank key was accepted")
        } catch {
            #expect(error.value == "<empty>")
        }
    }
}
