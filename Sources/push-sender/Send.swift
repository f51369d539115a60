import APNsClient
import APNsCore
import ArgumentParser
import EnrichmentCore
import Foundation

/// `push-sender send`: pushes to APNs (or the mock) with per-token results.
struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a payload to one or many device tokens.",
        discussion: """
            The payload is sent minified (APNs counts the bytes sent: 4096 at most, 5120 for voip). One JWT per key \
            is made and reused for 50 minutes. 429 and 5xx answers are retried with exponential backoff; \
            BadDeviceToken, Unregistered, ExpiredToken and PayloadTooLarge never are. Exit status 0 when every push \
            was accepted, 1 otherwise.

            Example (against the mock):
              push-sender send --host https://127.0.0.1:2197 --ca data/mock-apns/ca.pem \\
                --key certs/AuthKey_TEST123456.p8 \\
                --key-id TEST123456 --team-id TEAM123456 \\
                --topic com.example.app --payload payloads/location.json \\
                --token <64 hex>
            """)

    @OptionGroup var payload: PayloadOptions
    @OptionGroup var headers: HeaderOptions
    @OptionGroup var tokens: TokenOptions
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Validate everything (JSON, size to the byte, header rules, tokens) without sending.") var dryRun = false
    @Flag(help: "Print per-token results as JSON.") var json = false
    @Flag(help: "No progress bar, even on a terminal.") var quiet = false

    func run() async throws {
        let now = Int64(Date().timeIntervalSince1970)
        let document: JSONValue
        do { document = try payload.load(now: now) } catch let problem as PayloadProblem {
            printError(problem.message)
            throw ExitCode(3)
        }
        let bytes = JSONWriter.bytes(document)
        let pushType = PushType(rawValue: headers.pushType)!
        let topic = pushType.topic(forBundle: headers.topic)
        let allTokens = try tokens.all()
        let requests = allTokens.map { token in
            APNsRequest(deviceToken: token, topic: topic, pushType: pushType.rawValue, priority: headers.priority,
                        expiration: headers.expiration, collapseID: headers.collapseId, apnsID: headers.apnsId, payload: bytes)
        }

        // Problems shared by every token stop everything before a connection is opened.
        // The payload and headers are the same for every token: check them once, with a well-formed token.
        var probe = requests[0]
        probe.deviceToken = String(repeating: "0", count: 64)
        if let violation = APNsValidator.violation(of: probe) {
            printError("\(violation.reason.rawValue): \(violation.message)")
            throw ExitCode(1)
        }
        var local: [Int: APNsValidator.Violation] = [:]
        for (index, request) in requests.enumerated() where !APNsValidator.isValidDeviceToken(request.deviceToken) {
            local[index] = APNsValidator.violation(of: request)
        }
        if dryRun {
            let report = requests.enumerated().map { index, request in
                APNsSendResult(deviceToken: request.deviceToken, status: local[index] == nil ? nil : 400,
                               reason: local[index]?.reason, apnsID: nil, timestamp: nil, attempts: 0, transportError: nil)
            }
            if json {
                print(ResultPrinter.json(report, dryRun: true))
            } else {
                print("Dry run: payload \(bytes.count) of \(pushType.maximumPayloadSize) bytes, topic \(topic), push type \(pushType.rawValue)"
                      + (headers.priority.map { ", priority \($0)" } ?? "") + ".")
                print("\(requests.count - local.count) of \(requests.count) tokens are well-formed; nothing was sent.")
                for (index, violation) in local.sorted(by: { $0.key < $1.key }) {
                    print("  \(ResultPrinter.abbreviate(requests[index].deviceToken)): \(violation.message)")
                }
            }
            if !local.isEmpty { throw ExitCode(1) }
            return
        }

        let sender = try APNsSender(configuration: try connection.senderConfiguration())
        let sendable = requests.enumerated().filter { local[$0.offset] == nil }
        let progress = ProgressBar(total: sendable.count, enabled: !quiet && !json && sendable.count > 1)
        let sent = await sender.send(sendable.map(\.element), concurrency: connection.concurrency) { progress.update($0) }
        progress.finish()
        try await sender.shutdown()

        // Tokens refused locally are reported with the answer Apple would have given, without being sent.
        var results = requests.enumerated().map { index, request in
            APNsSendResult(deviceToken: request.deviceToken, status: local[index]?.status, reason: local[index]?.reason,
                           apnsID: nil, timestamp: nil, attempts: 0, transportError: local[index]?.message)
        }
        for (position, item) in sendable.enumerated() { results[item.offset] = sent[position] }
        print(json ? ResultPrinter.json(results, dryRun: false) : ResultPrinter.table(results))
        if results.contains(where: { !$0.succeeded }) { throw ExitCode(1) }
    }
}
