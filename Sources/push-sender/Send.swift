import APNsClient
import APNsCore
import ArgumentParser
import EnrichmentCore
import Essentials
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
    @Flag(help: "Validate everything (JSON, size to the byte, header rules, tokens) without sending.") var dryRun =
        false
    @Flag(help: "Print per-token results as JSON.") var json = false
    @Flag(help: "No progress bar, even on a terminal.") var quiet = false

    func run() async throws {
        let now = Int64(Date().timeIntervalSince1970)
        let document: JSONValue
        do { document = try payload.load(now: now) } catch let problem as PayloadProblem {
            printError(problem.message)
            throw ExitCode(3)
        }
        let batch: APNsBatch
        do {
            // Problems shared by every token stop everything before a connection is opened.
            batch = try APNsBatch(
                payload: JSONWriter.bytes(document), tokens: try tokens.all(), bundle: headers.topic,
                pushType: PushType(rawValue: headers.pushType)!, priority: headers.priority,
                expiration: headers.expiration, collapseID: headers.collapseId, apnsID: headers.apnsId)
        } catch let violation as APNsValidator.Violation {
            printError("\(violation.reason.rawValue): \(violation.message)")
            throw ExitCode(1)
        }
        if dryRun {
            print(json ? ResultPrinter.json(batch.dryRunResults, dryRun: true) : ResultPrinter.dryRun(batch))
            if !batch.localRefusals.isEmpty { throw ExitCode(1) }
            return
        }
        let sender = try APNsSender(configuration: try connection.senderConfiguration())
        let progress = ProgressBar(total: batch.sendableCount, enabled: !quiet && !json && batch.sendableCount > 1)
        let results = await batch.send(with: sender, concurrency: connection.concurrency) { progress.update($0) }
        progress.finish()
        try await sender.shutdown()
        print(json ? ResultPrinter.json(results, dryRun: false) : ResultPrinter.table(results))
        if results.contains(where: { !$0.succeeded }) { throw ExitCode(1) }
    }
}
