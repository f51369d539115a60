import EnrichmentRuntime
import EnrichmentService
import Essentials
import Foundation
import TestSupport
import Testing

/// `docs/openapi.yaml` is valid and true: openapi-spec-validator checks the document, and schemathesis throws
/// generated requests (valid and invalid) at a real server and checks every answer against it, with and without
/// an API key. Both tools come from pip (`scripts/install-test-tools.sh` installs them); the run is bounded by a fixed seed
/// and a fixed number of examples per operation.
@Suite("OpenAPI contract (openapi-spec-validator, schemathesis)", .serialized)
struct ContractTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let specification = root.appendingPathComponent("docs/openapi.yaml").path
    static let settings = root.appendingPathComponent(".ci/schemathesis.toml").path
    static let install =
        "install the contract tools with: pip install -r scripts/requirements-contract.txt (bash scripts/install-test-tools.sh does)"

    /// Runs a command, returning its exit status and combined output.
    static func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await blocking {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = arguments
            process.currentDirectoryURL = FileManager.default.temporaryDirectory
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
    }

    @Test("the error reasons the document lists are exactly the service's vocabulary (APIReason)")
    func reasonVocabulary() async throws {
        let result = try await Self.run([
            "python3", "-c",
            """
            import sys, yaml
            document = yaml.safe_load(open(sys.argv[1]))
            reason = document["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["reason"]
            print("\\n".join(reason["enum"]))
            """, Self.specification,
        ])
        #expect(result.status == 0, "\(result.output.suffix(2000)) — \(Self.install)")
        let documented = result.output.split(separator: "\n").map(String.init)
        #expect(documented.sorted() == APIReason.allCases.map(\.rawValue).sorted())
        #expect(Set(documented).count == documented.count)
    }

    @Test("the document passes openapi-spec-validator")
    func documentIsValid() async throws {
        let result = try await Self.run([
            "python3", "-c",
            """
            import sys
            from openapi_spec_validator import validate
            from openapi_spec_validator.readers import read_from_filename
            document, _ = read_from_filename(sys.argv[1])
            validate(document)
            print("valid")
            """, Self.specification,
        ])
        #expect(result.status == 0, "openapi-spec-validator: \(result.output.suffix(2000)) — \(Self.install)")
        #expect(result.output.contains("valid"))
    }

    @Test(
        "schemathesis finds no failure, without and with an API key",
        arguments: [nil, "contract-key-7f3a"] as [String?])
    func schemathesis(apiKey: String?) async throws {
        // Delivery is on (against a mock), so /v1/push is exercised for real rather than answering 503.
        try await withDelivery({ configuration in
            configuration.apiKey = apiKey.map { Secret($0) }
            // Channels and broadcasts go to the mock too (never to Apple).
            configuration.delivery.channelsSandboxURL = configuration.delivery.sandboxURL
            configuration.delivery.broadcastSandboxURL = configuration.delivery.sandboxURL
            configuration.delivery.channelsProductionURL = configuration.delivery.productionURL
            configuration.delivery.broadcastProductionURL = configuration.delivery.productionURL
        }) { client, _, _ in
            var arguments = [
                "schemathesis", "--config-file", Self.settings, "run", Self.specification, "--url", client.base,
                "--checks", "all", "--seed", "20261123", "--max-examples", "100", "--workers", "2",
                "--no-color", "--generation-database", "none",
            ]
            if let apiKey { arguments += ["-H", "Authorization: Bearer \(apiKey)"] }
            let result = try await Self.run(arguments)
            #expect(
                result.status == 0, "schemathesis reported failures:\n\(result.output.suffix(6000))\n\(Self.install)")
            #expect(result.output.contains("passed"))
            #expect(!result.output.contains("failed,") && !result.output.contains(" failures in "))
        }
    }
}
