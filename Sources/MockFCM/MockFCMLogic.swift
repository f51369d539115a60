import Essentials
public import FCMCore
import Foundation
public import _CryptoExtras

/// A service account the mock FCM knows: its e-mail (the assertion's `iss`), its project, and the public half of
/// its key.
public struct MockFCMAccount: Sendable {
    public var clientEmail: String
    public var projectID: String
    public var publicKey: _RSA.Signing.PublicKey

    public init(clientEmail: String, projectID: String, publicKey: _RSA.Signing.PublicKey) {
        self.clientEmail = clientEmail
        self.projectID = projectID
        self.publicKey = publicKey
    }

    /// The account of a service-account key file.
    public init(_ account: FCMServiceAccount) throws(FCMCredentialProblem) {
        self.init(
            clientEmail: account.clientEmail, projectID: account.projectID,
            publicKey: try account.signingKey().publicKey)
    }
}

/// An answer of the mock.
struct MockFCMReply {
    var status: Int
    var headers: [(String, String)] = []
    var body: [UInt8]
    var delayMilliseconds = 0

    static func json(_ status: Int, _ body: [UInt8], headers: [(String, String)] = []) -> MockFCMReply {
        MockFCMReply(
            status: status, headers: [("content-type", "application/json; charset=UTF-8")] + headers, body: body)
    }

    static func googleError(
        _ status: Int, _ rpcStatus: String, _ message: String, code: FCMErrorCode? = nil, fields: [String] = [],
        headers: [(String, String)] = []
    ) -> MockFCMReply {
        .json(
            status,
            FCMErrorBody(code: status, message: message, status: rpcStatus, errorCode: code, fieldViolations: fields)
                .json, headers: headers)
    }

    static func oauthError(_ error: String, _ description: String) -> MockFCMReply {
        .json(400, JSONWriter.bytes(.object(["error": .string(error), "error_description": .string(description)])))
    }
}

/// What the mock FCM answers, decided without a socket: the token endpoint (`POST /token`, the JWT-bearer grant)
/// and the send endpoint (`POST /v1/projects/{project}/messages:send`), each checked as Google documents, plus the
/// control endpoints.
struct MockFCMLogic: Sendable {
    let accounts: [String: MockFCMAccount]
    let state: MockFCMState
    let clock: any WallClock
    let accessTokenLifetime: Int64

    /// The path of the token endpoint (a service-account file made by the mock names it as its `token_uri`).
    static let tokenPath = "/token"

    func respond(method: String, path: String, authority: String, headers: [String: String], body: [UInt8])
        -> MockFCMReply
    {
        if path.hasPrefix("/control/") {
            return MockFCMControl(state: state).respond(method: method, path: path, body: body)
        }
        if path == Self.tokenPath {
            guard method == "POST" else { return .oauthError("invalid_request", "the token endpoint takes POST") }
            return token(form: body, audience: "https://\(authority)\(path)")
        }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[1] == "v1", parts[2] == "projects", parts[4] == "messages:send",
            !parts[3].isEmpty
        else {
            return .googleError(404, "NOT_FOUND", "The requested URL \(path) was not found on this server.")
        }
        guard method == "POST" else {
            return .googleError(405, "METHOD_NOT_ALLOWED", "Method \(method) is not allowed for \(path).")
        }
        return send(project: String(parts[3]), headers: headers, body: body)
    }

    private func now() -> Int64 { Int64(clock.now().timeIntervalSince1970.rounded(.down)) }

    /// The JWT-bearer grant (RFC 7523) as Google's token endpoint answers it.
    private func token(form: [UInt8], audience: String) -> MockFCMReply {
        let behaviour = state.tokenEndpointBehaviour()
        var reply = issueToken(form: form, audience: audience, refuse: behaviour.refuse)
        reply.delayMilliseconds = behaviour.delay
        return reply
    }

    private func issueToken(form: [UInt8], audience: String, refuse: Bool) -> MockFCMReply {
        var fields: [String: String] = [:]
        for pair in String(decoding: form, as: UTF8.self).split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            let key = String(kv[0]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            let value =
                kv.count > 1
                ? (String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
            fields[key] = value
        }
        guard let grant = fields["grant_type"] else {
            return .oauthError("invalid_request", "Missing required parameter: grant_type")
        }
        guard grant == FCMAssertion.grantType else {
            return .oauthError("unsupported_grant_type", "Invalid grant_type: \(grant)")
        }
        guard let assertion = fields["assertion"], !assertion.isEmpty else {
            return .oauthError("invalid_request", "Missing required parameter: assertion")
        }
        let issuer = Self.unverifiedIssuer(assertion)
        guard let account = issuer.flatMap({ accounts[$0] }) else {
            return .oauthError("invalid_grant", "Invalid grant: account not found")
        }
        if refuse { return .oauthError("invalid_grant", "Invalid JWT Signature.") }
        let claims: FCMAssertion.Claims
        do {
            claims = try FCMAssertion.verify(assertion, publicKey: account.publicKey, audience: audience, now: now())
        } catch {
            return .oauthError(error.error, error.description)
        }
        let token = "ya29.mock-" + UUID().uuidString.lowercased()
        state.issue(
            token,
            .init(
                account: account.clientEmail, project: account.projectID,
                scopes: claims.scope.split(separator: " ").map(String.init), expiresAt: now() + accessTokenLifetime))
        return .json(
            200,
            JSONWriter.bytes(
                .object([
                    "access_token": .string(token), "expires_in": .int(accessTokenLifetime),
                    "token_type": .string("Bearer"),
                ])))
    }

    static func unverifiedIssuer(_ assertion: String) -> String? {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(String(parts[1])),
            let claims = try? JSONParser.parse(data, duplicateKeys: .lastWins)
        else { return nil }
        return claims["iss"]?.stringValue
    }

    private func send(project: String, headers: [String: String], body: [UInt8]) -> MockFCMReply {
        guard let authorization = headers["authorization"], !authorization.isEmpty else {
            return .googleError(
                401, "UNAUTHENTICATED",
                "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie "
                    + "or other valid authentication credential.")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", let issued = state.issued(String(parts[1])),
            issued.expiresAt > now()
        else {
            return .googleError(
                401, "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other "
                    + "valid authentication credential.")
        }
        guard
            issued.scopes.contains(FCMAssertion.messagingScope)
                || issued.scopes.contains("https://www.googleapis.com/auth/cloud-platform")
        else {
            return .googleError(403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.")
        }
        guard issued.project == project else {
            return .googleError(
                403, "PERMISSION_DENIED",
                "Permission 'cloudmessaging.messages.create' denied on resource "
                    + "'//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).")
        }
        let checked = MockFCMMessageRules.check(body)
        let message: JSONValue
        let validateOnly: Bool
        switch checked {
        case .failure(let refusal):
            state.record(
                MockFCMReceived(
                    project: project, body: body, message: .null, status: 400, errorCode: refusal.code,
                    validateOnly: false))
            return .googleError(
                400, "INVALID_ARGUMENT", refusal.message, code: refusal.code, fields: refusal.field.map { [$0] } ?? [])
        case .success(let ok):
            message = ok.message
            validateOnly = ok.validateOnly
        }
        let token = message["token"]?.stringValue ?? ""
        if let script = state.takeScript(for: token) {
            let (status, rpcStatus) = script.errorCode.httpStatus
            var reply = MockFCMReply.googleError(
                status, rpcStatus, Self.message(for: script.errorCode), code: script.errorCode,
                fields: script.errorCode == .invalidArgument ? ["message.token"] : [],
                headers: script.retryAfter.map { [("retry-after", String($0))] } ?? [])
            reply.delayMilliseconds = script.delayMilliseconds
            state.record(
                MockFCMReceived(
                    project: project, body: body, message: message, status: status, errorCode: script.errorCode,
                    validateOnly: validateOnly))
            return reply
        }
        state.record(
            MockFCMReceived(
                project: project, body: body, message: message, status: 200, errorCode: nil,
                validateOnly: validateOnly))
        let id = validateOnly ? "fake_message_id" : "0:\(now())\(UInt32.random(in: 0...UInt32.max))"
        return .json(200, JSONWriter.bytes(.object(["name": .string("projects/\(project)/messages/\(id)")])))
    }

    /// Google's `error.message` for each scripted code.
    static func message(for code: FCMErrorCode) -> String {
        switch code {
        case .unregistered: "Requested entity was not found."
        case .invalidArgument: "The registration token is not a valid FCM registration token"
        case .senderIDMismatch: "SenderId mismatch"
        case .quotaExceeded: "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute'."
        case .unavailable: "The service is currently unavailable."
        case .internal: "Internal error encountered."
        case .thirdPartyAuthError: "Auth error from APNS or Web Push Service"
        default: "Unknown error."
        }
    }
}
