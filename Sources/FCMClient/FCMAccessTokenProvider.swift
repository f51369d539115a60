public import AsyncHTTPClient
public import Essentials
public import FCMCore
import Foundation
public import NIOCore
import NIOHTTP1

/// Exchanges a signed assertion for an access token at a token endpoint (an HTTP POST of a form).
public protocol FCMTokenExchanging: Sendable {
    /// Posts `form` (already form-encoded) to `uri`; answers the status and body.
    func post(form: String, to uri: String) async throws -> (status: Int, body: [UInt8])
}

/// Why no access token could be had.
public enum FCMAuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The token endpoint refused the service account (`invalid_grant`, `unauthorized_client`...): a wrong or
    /// revoked key, a deleted account, a clock far off. No retry helps until the credential is fixed.
    case refused(status: Int, error: String, detail: String)
    /// The token endpoint could not be reached or answered something unreadable; worth trying again later.
    case unavailable(String)
    /// The service account's key cannot sign.
    case credential(String)

    public var description: String {
        switch self {
        case .refused(let status, let error, let detail):
            "the token endpoint refused the service account (\(status) \(error)\(detail.isEmpty ? "" : ": \(detail)")); "
                + "check the key file (a key deleted in the Cloud console stops working at once) and the clock"
        case .unavailable(let detail): "no access token: the token endpoint did not answer usably (\(detail))"
        case .credential(let detail): "the service account cannot sign: \(detail)"
        }
    }

    /// True for a refused credential (as opposed to an outage).
    public var isRefusal: Bool {
        switch self {
        case .refused, .credential: true
        case .unavailable: false
        }
    }
}

/// Hands out one OAuth 2.0 access token per service account, from the JWT-bearer grant: cached until
/// `refreshMargin` seconds before it expires, then refreshed by the first caller while every other caller waits
/// for that same refresh (one request to the token endpoint however many sends need a token).
public actor FCMAccessTokenProvider {
    public let account: FCMServiceAccount
    private let exchange: any FCMTokenExchanging
    private let clock: any WallClock
    /// A token is replaced this many seconds before its expiry (Google's tokens live an hour).
    public let refreshMargin: Int64
    private var current: Issued?
    private var inflight: Task<Issued, any Error>?
    /// Requests made to the token endpoint (for tests and statistics).
    public private(set) var refreshes = 0

    public init(
        account: FCMServiceAccount, exchange: any FCMTokenExchanging, clock: any WallClock = SystemWallClock(),
        refreshMargin: Int64 = 300
    ) {
        self.account = account
        self.exchange = exchange
        self.clock = clock
        self.refreshMargin = refreshMargin
    }

    /// A token valid for at least `refreshMargin` more seconds (by the token endpoint's `expires_in`).
    public func token() async throws(FCMAuthError) -> Secret {
        let now = Int64(clock.now().timeIntervalSince1970.rounded(.down))
        if let current, now < current.refreshAt { return current.token }
        let task: Task<Issued, any Error>
        if let inflight {
            task = inflight
        } else {
            refreshes += 1
            let account = self.account
            let exchange = self.exchange
            let margin = refreshMargin
            task = Task { try await Self.fetch(account: account, exchange: exchange, now: now, margin: margin) }
            inflight = task
        }
        do {
            let fresh = try await task.value
            if inflight == task { inflight = nil }
            if current.map({ $0.expiresAt < fresh.expiresAt }) ?? true { current = fresh }
            return fresh.token
        } catch {
            if inflight == task { inflight = nil }
            // A refresh that failed early (inside the margin) leaves the current token in use while it lasts:
            // one blip at the token endpoint does not stop sending.
            let now = Int64(clock.now().timeIntervalSince1970.rounded(.down))
            if let current, now < current.expiresAt - 30 { return current.token }
            throw (error as? FCMAuthError) ?? .unavailable("\(error)")
        }
    }

    /// A token and when it expires; it is replaced from `refreshAt` on.
    struct Issued: Sendable {
        var token: Secret
        var expiresAt: Int64
        var refreshAt: Int64
    }

    /// Forgets `token` after FCM refused it (401), so the next call gets a new one; a newer token is kept.
    public func invalidate(_ token: Secret) {
        if current?.token == token { current = nil }
    }

    private static func fetch(
        account: FCMServiceAccount, exchange: any FCMTokenExchanging, now: Int64, margin: Int64
    ) async throws -> Issued {
        let assertion: String
        do { assertion = try FCMAssertion.sign(account, issuedAt: now) } catch {
            throw FCMAuthError.credential(error.message)
        }
        let form = "grant_type=" + formEncode(FCMAssertion.grantType) + "&assertion=" + assertion
        let answer: (status: Int, body: [UInt8])
        do { answer = try await exchange.post(form: form, to: account.tokenURI) } catch {
            throw FCMAuthError.unavailable("\(error)")
        }
        let document = try? JSONParser.parse(answer.body, duplicateKeys: .lastWins)
        guard answer.status == 200 else {
            // Only a refusal of the credential is one (400 invalid_grant and the like, 401, 403); 408, 429 and 5xx
            // are the endpoint being busy or away.
            if [400, 401, 403].contains(answer.status), let error = document?["error"]?.stringValue {
                throw FCMAuthError.refused(
                    status: answer.status, error: error, detail: document?["error_description"]?.stringValue ?? "")
            }
            throw FCMAuthError.unavailable("token endpoint answered \(answer.status)")
        }
        guard let token = document?["access_token"]?.stringValue, !token.isEmpty,
            case .int(let lifetime)? = document?["expires_in"], lifetime > 0
        else { throw FCMAuthError.unavailable("the token endpoint's answer has no access_token and expires_in") }
        // Replaced `margin` seconds before it expires, or halfway through a life shorter than twice that.
        return Issued(
            token: Secret(token), expiresAt: now + lifetime, refreshAt: now + lifetime - min(margin, lifetime / 2))
    }

    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

/// The token exchange over an `HTTPClient`.
public struct HTTPTokenExchange: FCMTokenExchanging {
    let client: HTTPClient
    let timeout: TimeAmount

    public init(client: HTTPClient, timeout: TimeAmount = .seconds(10)) {
        self.client = client
        self.timeout = timeout
    }

    public func post(form: String, to uri: String) async throws -> (status: Int, body: [UInt8]) {
        var request = HTTPClientRequest(url: uri)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: form))
        let response = try await client.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 1 << 16)
        return (Int(response.status.code), Array(buffer: body))
    }
}
