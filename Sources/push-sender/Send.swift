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

            With --fcm the tokens are FCM registration tokens and each gets the payload's Android twin through FCM \
            HTTP v1 (see docs/ANDROID.md): --service-account names the Firebase key file, --fcm-url a local FCM.

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
    @OptionGroup(title: "Android (FCM)") var fcm: FCMOptions
    @Flag(help: "Validate everything (JSON, size to the byte, header rules, tokens) without sending.") var dryRun =
        false
    @Flag(help: "Print results as JSON Lines (one object per push, as each finishes) and the summary on stderr.")
    var json = false
    @Flag(help: "Print only the pushes that were not accepted (and the summary).") var failuresOnly = false
    @Flag(help: "No progress bar or summary line, even on a terminal.") var quiet = false

    /// The key an `.apns` file (as `xcrun simctl push` reads it) names its app with; never sent to APNs.
    static let simulatorTargetKey = "Simulator Target Bundle"

    func run() async throws {
        if fcm.fcm { return try await runFCM() }
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
        let bundle = try headers.bundle(simulatorTarget: simulatorTarget)
        let defaultPayload = document.map(JSONWriter.bytes)
        if let file = tokens.tokensFile, !dryRun {
            // Read as it is sent, a chunk of lines at a time: memory holds what is in flight, not the whole file.
            let source: InputLines
            if file == "-" {
                source = InputLines(handle: .standardInput, readSize: nil)
            } else {
                guard let handle = FileHandle(forReadingAtPath: file) else {
                    throw ValidationError("cannot read --tokens-file '\(file)'")
                }
                source = InputLines(handle: handle, readSize: 1 << 20)
            }
            try await sendStreaming(source, defaultPayload: defaultPayload, bundle: bundle, now: now)
            return
        }
        let entries = try tokens.entries()
        if document == nil, entries.contains(where: { $0.payload == nil && $0.problem == nil }) {
            throw PayloadOptions.missing
        }
        let output = ResultOutput(json: json, failuresOnly: failuresOnly, total: entries.count)
        let (batch, usable) = try makeBatch(
            entries, from: 0, defaultPayload: defaultPayload, bundle: bundle, now: now, output: output)
        if dryRun {
            if json {
                for (position, result) in batch.dryRunResults.enumerated() {
                    output.add(usable[position], result, dryRun: true)
                }
                output.flush()
            } else {
                print(ResultPrinter.dryRun(batch))
            }
            if output.failed > 0 || !batch.localRefusals.isEmpty { throw ExitCode(1) }
            return
        }
        let sender = try APNsSender(configuration: try connection.withEnvironment().senderConfiguration())
        let broken = entries.count - usable.count
        let progress = ProgressBar(total: batch.sendableCount, enabled: !quiet && !json && batch.sendableCount > 1)
        let started = ContinuousClock.now
        await batch.stream(with: sender, concurrency: connection.concurrency) { position, result in
            let done = output.add(usable[position], result)
            progress.update(done - broken)
        }
        progress.finish()
        try await finish(sender, output, since: started)
    }

    /// Standard input as it comes: each read's complete lines go out as a batch at once, while the next lines are
    /// read, over the same connections and JWT; a script can keep writing `TOKEN {json}` lines for as long as it
    /// likes. Results are streamed (`--json`) or tabled at the end.
    private func sendStreaming(_ source: InputLines, defaultPayload: [UInt8]?, bundle: String, now: Int64) async throws
    {
        let output = ResultOutput(json: json, failuresOnly: failuresOnly, total: 0)
        let sender = try APNsSender(configuration: try connection.withEnvironment().senderConfiguration())
        let started = ContinuousClock.now
        var failure: (any Error)?
        await withTaskGroup(of: Void.self) { group in
            var offset = 0
            var running = 0
            var chunks = source.chunks().makeAsyncIterator()
            var first = tokens.tokens.map { TokenOptions.Entry(token: $0) }
            while let chunk = await chunks.next() {
                source.taken()
                let entries = first + chunk
                first = []
                if defaultPayload == nil, entries.contains(where: { $0.payload == nil && $0.problem == nil }) {
                    failure = PayloadOptions.missing
                    break
                }
                do {
                    let (batch, usable) = try makeBatch(
                        entries, from: offset, defaultPayload: defaultPayload, bundle: bundle, now: now,
                        output: output)
                    offset += entries.count
                    group.addTask {
                        await batch.stream(with: sender, concurrency: connection.concurrency) { position, result in
                            output.add(usable[position], result)
                        }
                    }
                    running += 1
                    // At most two batches on the wire: reading ahead stops while they drain.
                    if running >= 2 {
                        await group.next()
                        running -= 1
                    }
                } catch {
                    failure = error
                    break
                }
            }
            await group.waitForAll()
        }
        if let failure {
            try? await sender.shutdown()
            output.flush()
            throw failure
        }
        try await finish(sender, output, since: started)
    }

    /// The batch for `entries` (numbered from `offset`), with lines whose own payload cannot be used reported to
    /// `output` at once; returns it with the input index of each of its requests.
    private func makeBatch(
        _ entries: [TokenOptions.Entry], from offset: Int, defaultPayload: [UInt8]?, bundle: String, now: Int64,
        output: ResultOutput
    ) throws -> (APNsBatch, [Int]) {
        let usable = entries.indices.filter { entries[$0].problem == nil }
        let batchEntries: [(token: String, payload: [UInt8]?)] = usable.map { index in
            let entry = entries[index]
            return (entry.token, entry.payload.map { JSONWriter.bytes(PayloadStamp.stamp($0, now: now)) })
        }
        let batch: APNsBatch
        do throws(APNsValidator.Violation) {
            // Problems shared by every token stop everything before a connection is opened.
            batch = try APNsBatch(
                entries: batchEntries, defaultPayload: defaultPayload, bundle: bundle,
                pushType: headers.type, priority: headers.effectivePriority,
                expiration: headers.typedExpiration, collapseID: headers.collapseId, apnsID: headers.apnsId)
        } catch {
            printError("\(error.reason.rawValue): \(error.message)")
            throw ExitCode(1)
        }
        for index in entries.indices where entries[index].problem != nil {
            output.add(
                offset + index,
                APNsSendResult(
                    deviceToken: entries[index].token, status: nil, reason: nil, apnsID: nil, timestamp: nil,
                    attempts: 0, transportError: entries[index].problem))
        }
        return (batch, usable.map { offset + $0 })
    }

    private func finish(_ sender: APNsSender, _ output: ResultOutput, since started: ContinuousClock.Instant)
        async throws
    {
        let elapsed = ContinuousClock.now - started
        let statistics = await sender.statistics()
        try await sender.shutdown()
        output.finish(elapsed: elapsed, statistics: statistics, quiet: quiet)
        if output.failed > 0 { throw ExitCode(1) }
    }
}

/// A tokens file or standard input, read on a thread of its own as chunks of complete `TokenOptions` lines. At
/// most two chunks are read ahead of the sender (`taken()` after each): a file of a million tokens is never in
/// memory at once. Standard input gives what each read returns (a script's lines go out as they come); a file is
/// read `readSize` bytes at a time.
final class InputLines: Sendable {
    let handle: FileHandle
    let readSize: Int?
    private let room = DispatchSemaphore(value: 2)

    init(handle: FileHandle, readSize: Int?) {
        self.handle = handle
        self.readSize = readSize
    }

    /// The consumer took a chunk: one more may be read.
    func taken() { room.signal() }

    func chunks() -> AsyncStream<[TokenOptions.Entry]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [TokenOptions.Entry].self)
        let thread = Thread { [self] in
            var pending: [UInt8] = []
            while true {
                let data: Data
                if let readSize {
                    data = (try? handle.read(upToCount: readSize)) ?? Data()
                } else {
                    data = handle.availableData
                }
                if data.isEmpty { break }
                pending.append(contentsOf: data)
                guard let lastNewline = pending.lastIndex(of: UInt8(ascii: "\n")) else { continue }
                room.wait()
                continuation.yield(TokenOptions.parse(pending[...lastNewline]))
                pending.removeSubrange(...lastNewline)
            }
            if !pending.isEmpty {
                room.wait()
                continuation.yield(TokenOptions.parse(pending[...]))
            }
            continuation.finish()
        }
        thread.start()
        return stream
    }
}
