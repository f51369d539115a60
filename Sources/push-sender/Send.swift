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
    @Flag(help: "Print results as JSON Lines (one object per push, as each finishes) and the summary on stderr.")
    var json = false
    @Flag(help: "Print only the pushes that were not accepted (and the summary).") var failuresOnly = false
    @Flag(help: "No progress bar or summary line, even on a terminal.") var quiet = false

    /// The key an `.apns` file (as `xcrun simctl push` reads it) names its app with; never sent to APNs.
    static let simulatorTargetKey = "Simulator Target Bundle"

    func run() async throws {
        let now = Int64(Date().timeIntervalSince1970)
        var document: JSONValue?
        var simulatorTarget: String?
        do {
            if payload.isGiven { document = try payload.load(now: now) }
        } catch let problem as PayloadProblem {
            printError(problem.message)
            throw ExitCode(3)
        }
        if case .object(var members)? = document, let target = members.removeValue(forKey: Self.simulatorTargetKey) {
            simulatorTarget = target.stringValue
            document = .object(members)
        }
        let entries = try tokens.entries()
        if document == nil, entries.contains(where: { $0.payload == nil && $0.problem == nil }) {
            throw PayloadOptions.missing
        }
        let bundle = try headers.bundle(simulatorTarget: simulatorTarget)
        // Lines whose own payload cannot be read fail alone; the rest go into the batch.
        let broken = entries.indices.filter { entries[$0].problem != nil }
        let usable = entries.indices.filter { entries[$0].problem == nil }
        let batchEntries: [(token: String, payload: [UInt8]?)] = usable.map { index in
            let entry = entries[index]
            return (entry.token, entry.payload.map { JSONWriter.bytes(PayloadStamp.stamp($0, now: now)) })
        }
        let defaultPayload = document.map(JSONWriter.bytes)
        let pushType = PushType(rawValue: headers.pushType)!
        let batch: APNsBatch
        do throws(APNsValidator.Violation) {
            // Problems shared by every token stop everything before a connection is opened.
            batch = try APNsBatch(
                entries: batchEntries, defaultPayload: defaultPayload, bundle: bundle, pushType: pushType,
                priority: headers.effectivePriority, expiration: headers.expiration, collapseID: headers.collapseId,
                apnsID: headers.apnsId)
        } catch {
            printError("\(error.reason.rawValue): \(error.message)")
            throw ExitCode(1)
        }
        let output = ResultOutput(json: json, failuresOnly: failuresOnly, total: entries.count)
        for index in broken {
            output.add(
                index,
                APNsSendResult(
                    deviceToken: entries[index].token, status: nil, reason: nil, apnsID: nil, timestamp: nil,
                    attempts: 0, transportError: entries[index].problem))
        }
        if dryRun {
            if json {
                for (position, result) in batch.dryRunResults.enumerated() {
                    output.add(usable[position], result, dryRun: true)
                }
            } else {
                print(ResultPrinter.dryRun(batch))
            }
            if !batch.localRefusals.isEmpty || !broken.isEmpty { throw ExitCode(1) }
            return
        }
        let resolved = connection.withEnvironment()
        let sender = try APNsSender(configuration: try resolved.senderConfiguration())
        let progress = ProgressBar(total: batch.sendableCount, enabled: !quiet && !json && batch.sendableCount > 1)
        let started = ContinuousClock.now
        await batch.stream(with: sender, concurrency: connection.concurrency) { position, result in
            let done = output.add(usable[position], result)
            progress.update(done - broken.count)
        }
        let elapsed = ContinuousClock.now - started
        progress.finish()
        let statistics = await sender.statistics()
        try await sender.shutdown()
        output.finish(elapsed: elapsed, statistics: statistics, quiet: quiet)
        if output.failed > 0 { throw ExitCode(1) }
    }
}
