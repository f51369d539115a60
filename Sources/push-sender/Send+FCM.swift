import APNsCore
import ArgumentParser
import Essentials
import FCMClient
import FCMCore
import Foundation
import NIOCore

// `send --fcm`: the same payload, tokens, progress, results and exit codes as for APNs, to FCM HTTP v1. Each
// token's message is the payload's Android twin (`FCMMessage.fromAPNs`); the headers that have an FCM meaning
// (priority, expiration, collapse id) carry over.
extension Send {
    func runFCM() async throws {
        let now = Int64(Date().timeIntervalSince1970)
        var document: JSONValue?
        do {
            if payload.isGiven { document = try payload.load(now: now) }
        } catch let problem as PayloadProblem {
            printError(problem.message)
            throw ExitCode(3)
        }
        if case .object(var members)? = document {
            members[Send.simulatorTargetKey] = nil
            document = .object(members)
        }
        let account = try fcm.account()
        let entries = try tokens.entries()
        if document == nil, entries.contains(where: { $0.payload == nil && $0.problem == nil }) {
            throw PayloadOptions.missing
        }
        let options = FCMDeliveryOptions(
            dataOnly: fcm.dataOnly || headers.type == .background, apnsPriority: headers.effectivePriority?.rawValue,
            apnsExpiration: headers.typedExpiration?.epochSeconds, collapseID: headers.collapseId)
        var messages: [FCMMessage] = []
        var positions: [Int] = []
        var refusals: [(index: Int, token: String, problem: String)] = []
        for (index, entry) in entries.enumerated() {
            var problem = entry.problem ?? FCMRegistrationToken.problem(entry.token)
            if problem == nil, let source = entry.payload.map({ PayloadStamp.stamp($0, now: now) }) ?? document {
                do {
                    messages.append(
                        try FCMMessage.fromAPNs(payload: source, token: entry.token, options: options, now: now))
                    positions.append(index)
                } catch {
                    problem = error.description
                }
            }
            if let problem { refusals.append((index, entry.token, problem)) }
        }
        if dryRun {
            let size = messages.map(\.payloadSize).max() ?? 0
            var lines = [
                "Dry run: FCM messages for project \(account.projectID), payload up to \(size) of "
                    + "\(FCMMessage.maximumPayloadSize) bytes; \(messages.count) of \(entries.count) tokens can be sent; "
                    + "nothing was sent."
            ]
            for refusal in refusals {
                lines.append("  \(ResultPrinter.abbreviate(refusal.token)): \(refusal.problem)")
            }
            print(lines.joined(separator: "\n"))
            if !refusals.isEmpty { throw ExitCode(1) }
            return
        }
        let output = ResultOutput(json: json, failuresOnly: failuresOnly, total: entries.count, idColumn: "MESSAGE")
        for refusal in refusals {
            output.add(
                refusal.index,
                APNsSendResult(
                    deviceToken: refusal.token, status: nil, reason: nil, apnsID: nil, timestamp: nil, attempts: 0,
                    transportError: refusal.problem))
        }
        var configuration = FCMSenderConfiguration(
            baseURL: fcm.fcmUrl, additionalTrustRootsPEM: try connection.ca.map(readTrustRoots))
        configuration.connectTimeout = .milliseconds(Int64(connection.connectTimeout * 1000))
        configuration.retry = FCMRetryPolicy(maximumAttempts: connection.attempts)
        let sender = try FCMSender(account: account, configuration: configuration)
        let progress = ProgressBar(total: messages.count, enabled: !quiet && !json && messages.count > 1)
        let started = ContinuousClock.now
        let broken = entries.count - messages.count
        let sentPositions = positions
        await sender.send(messages, concurrency: connection.concurrency, validateOnly: fcm.validateOnly) {
            index, result in
            let done = output.add(sentPositions[index], Self.converted(result))
            progress.update(done - broken)
        }
        progress.finish()
        let elapsed = ContinuousClock.now - started
        try await sender.shutdown()
        output.finish(elapsed: elapsed, statistics: nil, quiet: quiet)
        if output.failed > 0 { throw ExitCode(1) }
    }

    private func readTrustRoots(_ file: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ValidationError("cannot read --ca '\(file)'")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// An FCM result in the results' shape: FCM's status, its error code (or Google's status) as the reason,
    /// Google's message as the note, the message's name where an apns-id would be.
    static func converted(_ result: FCMSendResult) -> APNsSendResult {
        APNsSendResult(
            deviceToken: result.token, status: result.status,
            reason: (result.errorCode?.rawValue ?? result.googleStatus).map(APNsReason.init(rawValue:)),
            apnsID: result.name, timestamp: nil, attempts: result.attempts,
            transportError: result.succeeded ? nil : (result.transportError ?? result.message))
    }
}
