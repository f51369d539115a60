import APNsClient
import APNsCore
import ArgumentParser
import Essentials
import Foundation
import NIOCore

/// Where channel requests and broadcasts go, and with which credentials: the push flags' host, trust and keys.
struct BroadcastOptions: ParsableArguments {
    @OptionGroup var connection: ConnectionOptions
    @Option(
        help: """
            The app's bundle id, without a push type's suffix (channels belong to an app and an environment).
            """)
    var bundleId: String
    @Option(
        help: """
            Base URL of the channel management API (default: api-manage-broadcast[.sandbox].push.apple.com:2196|2195, \
            or --host).
            """)
    var managementHost: String?
    @Option(
        help: """
            Base URL for broadcasts (default: api[.sandbox].push.apple.com as Apple's text says, or --host; Apple's \
            examples use https://api-broadcast[.sandbox].push.apple.com).
            """)
    var broadcastHost: String?
    @Option(help: "apns-request-id: a UUID echoed in the answer (default: APNs makes one).") var requestId: String?
    @Flag(help: "Print the answer as one JSON object.") var json = false

    func validate() throws {
        guard APNsBroadcastClient.isValidBundleID(bundleId) else {
            throw ValidationError("--bundle-id must be a bundle id (letters, digits, '-' and '.'), got '\(bundleId)'")
        }
        if let suffix = PushType.allCases.map(\.topicSuffix).first(where: { !$0.isEmpty && bundleId.hasSuffix($0) }) {
            throw ValidationError(
                "--bundle-id is the app's bundle id without '\(suffix)': channels and broadcasts name the app itself")
        }
        for (flag, value) in [("--management-host", managementHost), ("--broadcast-host", broadcastHost)] {
            if let value, !value.hasPrefix("https://") { throw ValidationError("\(flag) must be an https:// URL") }
        }
        if let requestId, UUID(uuidString: requestId) == nil {
            throw ValidationError("--request-id must be a UUID (8-4-4-4-12 hex digits)")
        }
    }

    /// The client for these flags (resolving APNS_* variables as `send` does).
    func client() throws -> APNsBroadcastClient {
        let resolved = connection.withEnvironment()
        var hosts: APNsBroadcastHosts
        if let host = resolved.host {
            hosts = .custom(host)
        } else {
            hosts = .apple(resolved.production ? .production : .sandbox)
        }
        if let managementHost { hosts.managementURL = managementHost }
        if let broadcastHost { hosts.broadcastURL = broadcastHost }
        let configuration = try resolved.senderConfiguration()
        return try APNsBroadcastClient(
            hosts: hosts, credentials: configuration.credentials,
            additionalTrustRootsPEM: configuration.additionalTrustRootsPEM,
            timeout: .milliseconds(Int64(max(resolved.connectTimeout, 10) * 1000)))
    }

    /// Runs one request, prints its answer (text or JSON), and maps a refusal to exit status 1 with Apple's reason.
    func run(_ body: (APNsBroadcastClient) async throws -> (text: String, json: [String: JSONValue])) async throws {
        let apns = try client()
        do {
            let answer = try await body(apns)
            try? await apns.shutdown()
            print(json ? String(decoding: JSONWriter.bytes(.object(answer.json)), as: UTF8.self) : answer.text)
        } catch let error as APNsBroadcastError {
            try? await apns.shutdown()
            if json {
                var members: [String: JSONValue] = [
                    "status": .int(Int64(error.status)), "reason": .string(error.reason.rawValue),
                ]
                if let hint = error.reason.hint { members["hint"] = .string(hint) }
                if let requestID = error.requestID { members["apns_request_id"] = .string(requestID) }
                print(String(decoding: JSONWriter.bytes(.object(members)), as: UTF8.self))
            }
            printError(error.description)
            throw ExitCode(1)
        } catch {
            try? await apns.shutdown()
            printError("could not reach APNs: \(error)")
            throw ExitCode(1)
        }
    }
}

/// `push-sender channels`: an app's broadcast channels (iOS 18) on Apple's channel management API.
struct Channels: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create, read, list and delete an app's broadcast channels (iOS 18 Live Activities).",
        discussion: """
            Channels live on Apple's channel management hosts (api-manage-broadcast.sandbox.push.apple.com:2195, \
            api-manage-broadcast.push.apple.com:2196), per app and environment, at most 10,000 each. A channel's \
            message storage policy is fixed when it is made: "none" (only devices online now get a broadcast; a \
            higher budget; broadcasts must have expiration 0) or "most-recent" (the last message is kept up to 8 \
            hours). Deleting a channel is for good. Same credentials as `send`. Exit status 0 on success, 1 when \
            APNs refused (its reason is printed).

            Example (against the mock):
              push-sender channels create --host https://127.0.0.1:2197 --ca data/mock-apns/ca.pem \\
                --key certs/AuthKey_TEST123456.p8 --key-id TEST123456 --team-id TEAM123456 \\
                --bundle-id com.example.app --storage-policy most-recent
            """,
        subcommands: [Create.self, Read.self, List.self, Delete.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a channel; prints its id.")
        @OptionGroup var options: BroadcastOptions
        @Option(help: "Message storage policy: none (0) or most-recent (1).") var storagePolicy: String

        func validate() throws {
            if APNsMessageStoragePolicy(name: storagePolicy) == nil {
                throw ValidationError("--storage-policy must be none (0) or most-recent (1), got '\(storagePolicy)'")
            }
        }

        func run() async throws {
            let policy = APNsMessageStoragePolicy(name: storagePolicy)!
            try await options.run { apns in
                let created = try await apns.createChannel(
                    bundleID: options.bundleId, policy: policy, requestID: options.requestId)
                var json: [String: JSONValue] = [
                    "channel_id": .string(created.channelID), "message_storage_policy": .string(policy.name),
                ]
                if let requestID = created.requestID { json["apns_request_id"] = .string(requestID) }
                return (created.channelID, json)
            }
        }
    }

    struct Read: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a channel's message storage policy.")
        @OptionGroup var options: BroadcastOptions
        @Option(help: "The channel id (as `create` printed it).") var channelId: String

        func run() async throws {
            try await options.run { apns in
                let policy = try await apns.readChannel(
                    bundleID: options.bundleId, channelID: channelId, requestID: options.requestId)
                return (
                    "\(channelId) message-storage-policy \(policy.name)",
                    ["channel_id": .string(channelId), "message_storage_policy": .string(policy.name)]
                )
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the app's channel ids, one per line.")
        @OptionGroup var options: BroadcastOptions

        func run() async throws {
            try await options.run { apns in
                let channels = try await apns.listChannels(bundleID: options.bundleId, requestID: options.requestId)
                return (channels.joined(separator: "\n"), ["channels": .array(channels.map(JSONValue.string))])
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel (for good).")
        @OptionGroup var options: BroadcastOptions
        @Option(help: "The channel id.") var channelId: String

        func run() async throws {
            try await options.run { apns in
                try await apns.deleteChannel(
                    bundleID: options.bundleId, channelID: channelId, requestID: options.requestId)
                return ("deleted \(channelId)", ["deleted": .string(channelId)])
            }
        }
    }
}

/// `push-sender broadcast`: one Live Activity update to every device subscribed to a channel.
struct Broadcast: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Broadcast a Live Activity update or end to a channel (iOS 18).",
        discussion: """
            POST /4/broadcasts/apps/<bundle id> with apns-channel-id, apns-push-type liveactivity, apns-priority and \
            apns-expiration; no topic. The payload is a Live Activity payload (aps.timestamp, aps.event update or \
            end, aps.content-state), 5120 bytes at most. A broadcast cannot start an activity (Apple): start it with \
            a push-to-start token and "input-push-channel". Exit status 0 when APNs accepted it (accepted, not yet \
            delivered), 1 otherwise.

            Example:
              push-sender broadcast --host https://127.0.0.1:2197 --ca data/mock-apns/ca.pem \\
                --key certs/AuthKey_TEST123456.p8 --key-id TEST123456 --team-id TEAM123456 \\
                --bundle-id com.example.app --channel-id <id> --stamp-now \\
                --payload-json '{"aps":{"event":"update","content-state":{"eta":4}}}'
            """)

    @OptionGroup var options: BroadcastOptions
    @OptionGroup var payload: PayloadOptions
    @Option(help: "The channel id.") var channelId: String
    @Option(help: "apns-priority: 10 (now), 5 (as power allows) or 1 (never wakes the device).") var priority = 10
    @Option(help: "apns-expiration: epoch seconds, or 0 (channels that store no message take only 0).")
    var expiration: Int64 = 0

    func validate() throws {
        if ![10, 5, 1].contains(priority) { throw ValidationError("--priority must be 10, 5 or 1") }
        if expiration < 0 { throw ValidationError("--expiration must be epoch seconds or 0") }
    }

    func run() async throws {
        let now = Int64(Date().timeIntervalSince1970)
        let document: JSONValue
        do { document = try payload.load(now: now) } catch let problem as PayloadProblem {
            printError(problem.message)
            throw ExitCode(3)
        }
        if let problem = LiveActivityPayload.broadcastProblem(document) {
            printError("the payload cannot be broadcast: \(problem)")
            throw ExitCode(3)
        }
        let bytes = JSONWriter.bytes(document)
        guard bytes.count <= APNsBroadcastClient.maximumPayloadSize else {
            printError(
                "the payload is \(bytes.count) bytes; a broadcast takes \(APNsBroadcastClient.maximumPayloadSize) at most"
            )
            throw ExitCode(3)
        }
        let priority = APNsPriority(rawValue: priority)!
        try await options.run { apns in
            let answer = try await apns.broadcast(
                bundleID: options.bundleId, channelID: channelId, payload: bytes, priority: priority,
                expiration: expiration, requestID: options.requestId)
            var json: [String: JSONValue] = ["status": .int(200), "channel_id": .string(channelId)]
            if let requestID = answer.requestID { json["apns_request_id"] = .string(requestID) }
            if let uniqueID = answer.uniqueID { json["apns_unique_id"] = .string(uniqueID) }
            return ("accepted by APNs (apns-unique-id \(answer.uniqueID ?? "-"))", json)
        }
    }
}
