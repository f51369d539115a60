import AsyncHTTPClient
public import Essentials
public import FCMCore
import Foundation
public import Logging
public import NIOCore
import NIOHTTP1
import NIOSSL

/// Where and how an `FCMSender` sends.
public struct FCMSenderConfiguration: Sendable {
    /// FCM's base URL; the mock's for local runs and tests.
    public var baseURL = "https://fcm.googleapis.com"
    /// Extra CA certificates (PEM) to trust, for a local FCM with a throwaway CA.
    public var additionalTrustRootsPEM: String?
    /// A connection that is not up by then fails (an untrusted certificate shows quickly).
    public var connectTimeout: TimeAmount = .seconds(5)
    /// One request's bound, answer included.
    public var requestTimeout: TimeAmount = .seconds(30)
    public var retry = FCMRetryPolicy()

    public init(baseURL: String = "https://fcm.googleapis.com", additionalTrustRootsPEM: String? = nil) {
        self.baseURL = baseURL
        self.additionalTrustRootsPEM = additionalTrustRootsPEM
    }
}

/// Sends FCM HTTP v1 messages for one service account: one access token shared by every send (refreshed one at a
/// time), many requests in flight as HTTP/2 streams on one connection (AsyncHTTPClient negotiates `h2` by ALPN),
/// Google's answers classified (`FCMAnswerKind`) and retried with backoff where Google says to.
public final class FCMSender: Sendable {
    public let account: FCMServiceAccount
    public let configuration: FCMSenderConfiguration
    public let tokens: FCMAccessTokenProvider
    private let client: HTTPClient
    private let clock: any WallClock
    private let logger: Logger
    private let sendURL: String

    public init(
        account: FCMServiceAccount, configuration: FCMSenderConfiguration = FCMSenderConfiguration(),
        clock: any WallClock = SystemWallClock(), logger: Logger = Logger(label: "fcm-sender")
    ) throws {
        self.account = account
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        var tls = TLSConfiguration.makeClientConfiguration()
        if let pem = configuration.additionalTrustRootsPEM {
            tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))]
        }
        var settings = HTTPClient.Configuration(tlsConfiguration: tls)
        settings.timeout.connect = configuration.connectTimeout
        settings.httpVersion = .automatic
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
        tokens = FCMAccessTokenProvider(
            account: account, exchange: HTTPTokenExchange(client: client), clock: clock)
        let base =
            configuration.baseURL.hasSuffix("/") ? String(configuration.baseURL.dropLast()) : configuration.baseURL
        sendURL = base + "/v1/projects/\(account.projectID)/messages:send"
    }

    /// Closes the connections.
    public func shutdown() async throws { try await client.shutdown() }

    /// Sends one message, retrying as `configuration.retry` says; never throws: every failure is in the result.
    public func send(_ message: FCMMessage, validateOnly: Bool = false) async -> FCMSendResult {
        let body = message.requestBody(validateOnly: validateOnly)
        var result = FCMSendResult(token: message.token, attempts: 0)
        var reauthenticated = false
        while true {
            result.attempts += 1
            // Each attempt's result is its own: nothing of an earlier answer is left on a later failure.
            result.status = nil
            result.errorCode = nil
            result.googleStatus = nil
            result.message = nil
            result.retryAfter = nil
            result.transportError = nil
            let retryAfter: Double?
            let token: Secret
            do { token = try await tokens.token() } catch {
                result.transportError = error.description
                result.kind = error.isRefusal ? .misconfigured : .retry
                if error.isRefusal { return result }
                guard await wait(afterAttempt: result.attempts, status: nil, retryAfter: nil) else { return result }
                continue
            }
            var request = HTTPClientRequest(url: sendURL)
            request.method = .POST
            request.headers.add(name: "authorization", value: "Bearer \(token.exposed)")
            request.headers.add(name: "content-type", value: "application/json; charset=UTF-8")
            request.body = .bytes(ByteBuffer(bytes: body))
            do {
                let response = try await client.execute(request, timeout: configuration.requestTimeout)
                let answer = Array(buffer: try await response.body.collect(upTo: 1 << 16))
                let status = Int(response.status.code)
                result.status = status
                result.transportError = nil
                if status == 200 {
                    result.googleStatus = nil
                    result.retryAfter = nil
                    let document = try? JSONParser.parse(answer, duplicateKeys: .lastWins)
                    result.name = document?["name"]?.stringValue
                    result.errorCode = nil
                    result.message = nil
                    result.kind = .sent
                    return result
                }
                let error = FCMErrorBody(json: answer)
                result.errorCode = error?.errorCode
                result.googleStatus = error?.status
                result.message = error?.message ?? String(decoding: answer.prefix(200), as: UTF8.self)
                let kind = FCMAnswerKind.classify(status: status, body: error)
                result.kind = kind
                switch kind {
                case .reauthenticate where !reauthenticated:
                    // The token was refused (revoked, or the clock jumped): one more try with a new one.
                    reauthenticated = true
                    await tokens.invalidate(token)
                    continue
                case .retry:
                    retryAfter = FCMRetryPolicy.retryAfterSeconds(
                        response.headers.first(name: "retry-after"), now: clock.now().timeIntervalSince1970)
                    result.retryAfter = retryAfter
                default:
                    return result
                }
            } catch {
                result.transportError = "no answer from FCM: \(error)"
                result.kind = .retry
                retryAfter = nil
            }
            guard await wait(afterAttempt: result.attempts, status: result.status, retryAfter: retryAfter) else {
                return result
            }
        }
    }

    /// Sends `messages` with at most `concurrency` in flight; `onResult` gets each one's input position and result
    /// as it is final.
    public func send(
        _ messages: [FCMMessage], concurrency: Int, validateOnly: Bool = false,
        onResult: @escaping @Sendable (Int, FCMSendResult) -> Void
    ) async {
        await withTaskGroup(of: (Int, FCMSendResult).self) { group in
            var next = 0
            func start() {
                let index = next
                let message = messages[index]
                next += 1
                group.addTask { (index, await self.send(message, validateOnly: validateOnly)) }
            }
            while next < messages.count && next < max(1, concurrency) { start() }
            while let (index, result) = await group.next() {
                onResult(index, result)
                if next < messages.count { start() }
            }
        }
    }

    /// Waits before the next attempt; false when none is left (or the task was cancelled).
    private func wait(afterAttempt attempt: Int, status: Int?, retryAfter: Double?) async -> Bool {
        guard let delay = configuration.retry.delay(afterAttempt: attempt, status: status, retryAfter: retryAfter)
        else { return false }
        logger.debug(
            "FCM send retried", metadata: ["attempt": "\(attempt)", "status": "\(status.map(String.init) ?? "-")"])
        do { try await Task.sleep(for: .milliseconds(Int64(delay * 1000))) } catch { return false }
        return true
    }
}
