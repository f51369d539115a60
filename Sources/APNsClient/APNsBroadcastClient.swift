public import APNsCore
import AsyncHTTPClient
public import Foundation
public import NIOCore
import NIOHTTP1
import NIOSSL

/// Where channel requests and broadcasts go, per environment.
///
/// Apple's broadcast page names `api[.sandbox].push.apple.com:443` in its text and `api-broadcast[.sandbox]
/// .push.apple.com` in both of its examples. The text is the default (node-apn, hapns and APNSwift use it too);
/// `broadcastURL` switches to the other (docs/LIVE-ACTIVITIES.md says why).
public struct APNsBroadcastHosts: Sendable, Equatable {
    /// The channel management API: `https://api-manage-broadcast[.sandbox].push.apple.com:2195|2196`.
    public var managementURL: String
    /// Broadcast pushes: `POST /4/broadcasts/apps/<bundle id>`.
    public var broadcastURL: String

    public init(managementURL: String, broadcastURL: String) {
        self.managementURL = managementURL.hasSuffix("/") ? String(managementURL.dropLast()) : managementURL
        self.broadcastURL = broadcastURL.hasSuffix("/") ? String(broadcastURL.dropLast()) : broadcastURL
    }

    /// Apple's hosts for an environment.
    public static func apple(_ environment: APNsEnvironmentName) -> APNsBroadcastHosts {
        switch environment {
        case .sandbox:
            APNsBroadcastHosts(
                managementURL: "https://api-manage-broadcast.sandbox.push.apple.com:2195",
                broadcastURL: environment.baseURL)
        case .production, .fcm:
            // FCM has no broadcast channels; callers only ask for APNs environments.
            APNsBroadcastHosts(
                managementURL: "https://api-manage-broadcast.push.apple.com:2196",
                broadcastURL: APNsEnvironmentName.production.baseURL)
        }
    }

    /// One host for both, such as the mock: `https://127.0.0.1:2197`.
    public static func custom(_ url: String) -> APNsBroadcastHosts {
        APNsBroadcastHosts(managementURL: url, broadcastURL: url)
    }
}

/// Broadcast channels (iOS 18): creates, reads, lists and deletes an app's channels on Apple's channel management
/// API, and sends broadcasts to a channel. Low volume (one broadcast reaches every subscribed device), so it uses
/// AsyncHTTPClient's shared client (HTTP/2, connections pooled per TLS set-up) rather than the push sender's tuned
/// connections; the credentials are the same.
public final class APNsBroadcastClient: APNsChannelManaging {
    public let hosts: APNsBroadcastHosts
    private let credentials: APNsCredentials
    /// The TLS set-up of every request (trust roots, the client certificate): AsyncHTTPClient pools connections
    /// per TLS configuration, so the shared client serves every credential without one to shut down.
    private let tls: TLSConfiguration
    private let timeout: TimeAmount

    /// Largest broadcast payload APNs accepts: "limited to a maximum size of 5 KB (5,120 bytes)".
    public static let maximumPayloadSize = 5120

    public init(
        hosts: APNsBroadcastHosts, credentials: APNsCredentials, additionalTrustRootsPEM: String? = nil,
        timeout: TimeAmount = .seconds(30)
    ) throws {
        self.hosts = hosts
        self.credentials = credentials
        self.timeout = timeout
        var tls = TLSConfiguration.makeClientConfiguration()
        if let pem = additionalTrustRootsPEM {
            tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))]
        }
        if case .certificate(let chain, let key) = credentials {
            tls.certificateChain = chain.map { .certificate($0) }
            tls.privateKey = .privateKey(key)
        }
        self.tls = tls
    }

    /// Nothing to close: requests go through `HTTPClient.shared`, which lives as long as the process.
    public func shutdown() async throws {}

    /// Creates a channel; answers its id (`apns-channel-id`).
    public func createChannel(
        bundleID: String, policy: APNsMessageStoragePolicy, requestID: String? = nil
    ) async throws -> (channelID: String, requestID: String?) {
        let body = #"{"message-storage-policy":\#(policy.rawValue),"push-type":"LiveActivity"}"#
        let answer = try await send(
            .POST, hosts.managementURL + "/1/apps/\(bundleID)/channels", headers: [], requestID: requestID,
            body: Array(body.utf8), expecting: 201)
        guard let channelID = answer.headers.first(name: "apns-channel-id"), !channelID.isEmpty else {
            throw APNsBroadcastError(
                status: answer.status, reason: .unknown("MissingChannelIdInAnswer"), requestID: answer.requestID)
        }
        return (channelID, answer.requestID)
    }

    /// A channel's storage policy.
    public func readChannel(bundleID: String, channelID: String, requestID: String? = nil) async throws
        -> APNsMessageStoragePolicy
    {
        let answer = try await send(
            .GET, hosts.managementURL + "/1/apps/\(bundleID)/channels", headers: [("apns-channel-id", channelID)],
            requestID: requestID, body: nil, expecting: 200)
        let document = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any]
        let value = document?["message-storage-policy"]
        let number = (value as? Int) ?? (value as? String).flatMap(Int.init)
        guard let number, let policy = APNsMessageStoragePolicy(rawValue: number) else {
            throw APNsBroadcastError(
                status: answer.status, reason: .unknown("UnreadableChannelAnswer"), requestID: answer.requestID)
        }
        return policy
    }

    /// Every channel id of the app in this environment.
    public func listChannels(bundleID: String, requestID: String? = nil) async throws -> [String] {
        let answer = try await send(
            .GET, hosts.managementURL + "/1/apps/\(bundleID)/all-channels", headers: [], requestID: requestID,
            body: nil, expecting: 200)
        guard let document = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
            let channels = document["channels"] as? [String]
        else {
            throw APNsBroadcastError(
                status: answer.status, reason: .unknown("UnreadableChannelAnswer"), requestID: answer.requestID)
        }
        return channels
    }

    /// Deletes a channel (for good: its id never comes back).
    public func deleteChannel(bundleID: String, channelID: String, requestID: String? = nil) async throws {
        _ = try await send(
            .DELETE, hosts.managementURL + "/1/apps/\(bundleID)/channels", headers: [("apns-channel-id", channelID)],
            requestID: requestID, body: nil, expecting: 204)
    }

    /// Sends a broadcast to a channel: `apns-push-type: liveactivity`, no topic, the expiration and priority
    /// Apple requires.
    public func broadcast(
        bundleID: String, channelID: String, payload: [UInt8], priority: APNsPriority = .immediately,
        expiration: Int64 = 0, requestID: String? = nil
    ) async throws -> APNsBroadcastAnswer {
        let answer = try await send(
            .POST, hosts.broadcastURL + "/4/broadcasts/apps/\(bundleID)",
            headers: [
                ("apns-channel-id", channelID), ("apns-push-type", "liveactivity"),
                ("apns-expiration", String(expiration)), ("apns-priority", String(priority.rawValue)),
            ], requestID: requestID, body: payload, expecting: 200)
        return APNsBroadcastAnswer(
            requestID: answer.requestID, uniqueID: answer.headers.first(name: "apns-unique-id"))
    }

    private struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        var requestID: String? { headers.first(name: "apns-request-id") }
    }

    /// A bundle id as Apple allows them (letters, digits, `-` and `.`), so that it is safe in a path.
    public static func isValidBundleID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 155
            && text.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == 0x2D || byte == 0x2E
            }
    }

    private func send(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)], requestID: String?, body: [UInt8]?,
        expecting: Int, tokenRefreshed: Bool = false
    ) async throws -> Answer {
        do {
            return try await sendOnce(
                method, url, headers: headers, requestID: requestID, body: body, expecting: expecting)
        } catch let error as APNsBroadcastError
            where error.reason == .expiredProviderToken && !tokenRefreshed
        {
            // The token outlived its hour (a clock jump, a long pause): one more try with a fresh one.
            guard case .token(let manager) = credentials else { throw error }
            manager.invalidate()
            return try await send(
                method, url, headers: headers, requestID: requestID, body: body, expecting: expecting,
                tokenRefreshed: true)
        }
    }

    private func sendOnce(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)], requestID: String?, body: [UInt8]?,
        expecting: Int
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.tlsConfiguration = tls
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let requestID { request.headers.add(name: "apns-request-id", value: requestID) }
        if case .token(let manager) = credentials {
            request.headers.add(name: "authorization", value: "bearer \(try manager.token())")
        }
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: timeout)
        let bytes = Array(buffer: try await response.body.collect(upTo: 1 << 20))
        let answer = Answer(status: Int(response.status.code), headers: response.headers, body: bytes)
        guard answer.status == expecting else {
            let reason =
                (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])?["reason"] as? String
            throw APNsBroadcastError(
                status: answer.status, reason: APNsReason(rawValue: reason ?? "HTTP\(answer.status)"),
                requestID: answer.requestID)
        }
        return answer
    }
}
