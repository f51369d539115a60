import Essentials
public import Foundation

/// FCM HTTP v1's error codes (`error.details[].errorCode` of type `google.firebase.fcm.v1.FcmError`), with
/// `unknown` for codes this build does not know.
public enum FCMErrorCode: Sendable, Hashable, CustomStringConvertible {
    case unspecifiedError
    case invalidArgument
    case unregistered
    case senderIDMismatch
    case quotaExceeded
    case unavailable
    case `internal`
    case thirdPartyAuthError
    case unknown(String)

    public init(rawValue: String) {
        switch rawValue {
        case "UNSPECIFIED_ERROR": self = .unspecifiedError
        case "INVALID_ARGUMENT": self = .invalidArgument
        case "UNREGISTERED": self = .unregistered
        case "SENDER_ID_MISMATCH": self = .senderIDMismatch
        case "QUOTA_EXCEEDED": self = .quotaExceeded
        case "UNAVAILABLE": self = .unavailable
        case "INTERNAL": self = .internal
        case "THIRD_PARTY_AUTH_ERROR": self = .thirdPartyAuthError
        default: self = .unknown(rawValue)
        }
    }

    public var rawValue: String {
        switch self {
        case .unspecifiedError: "UNSPECIFIED_ERROR"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .unregistered: "UNREGISTERED"
        case .senderIDMismatch: "SENDER_ID_MISMATCH"
        case .quotaExceeded: "QUOTA_EXCEEDED"
        case .unavailable: "UNAVAILABLE"
        case .internal: "INTERNAL"
        case .thirdPartyAuthError: "THIRD_PARTY_AUTH_ERROR"
        case .unknown(let code): code
        }
    }

    public var description: String { rawValue }

    /// The HTTP status and `google.rpc` status FCM answers with for this code.
    public var httpStatus: (code: Int, status: String) {
        switch self {
        case .invalidArgument: (400, "INVALID_ARGUMENT")
        case .unregistered: (404, "NOT_FOUND")
        case .senderIDMismatch: (403, "PERMISSION_DENIED")
        case .quotaExceeded: (429, "RESOURCE_EXHAUSTED")
        case .unavailable: (503, "UNAVAILABLE")
        case .internal: (500, "INTERNAL")
        case .thirdPartyAuthError: (401, "UNAUTHENTICATED")
        case .unspecifiedError, .unknown: (500, "UNKNOWN")
        }
    }
}

/// Google's error body, `{"error": {"code", "message", "status", "details": [...]}}`, as FCM answers a refused
/// send.
public struct FCMErrorBody: Sendable, Equatable {
    /// `error.code`: the HTTP status again.
    public var code: Int
    public var message: String
    /// `error.status`: the `google.rpc.Code` name (`NOT_FOUND`, `INVALID_ARGUMENT`...).
    public var status: String
    /// The FCM error code from `details`, when there is one (401 UNAUTHENTICATED for a bad access token has none).
    public var errorCode: FCMErrorCode?
    /// `google.rpc.BadRequest` field violations: the fields FCM names as wrong.
    public var fieldViolations: [String]

    public init(
        code: Int, message: String, status: String, errorCode: FCMErrorCode?, fieldViolations: [String] = []
    ) {
        self.code = code
        self.message = message
        self.status = status
        self.errorCode = errorCode
        self.fieldViolations = fieldViolations
    }

    /// Reads an error body; nil when it is not Google's shape.
    public init?(json bytes: some ContiguousBytes) {
        guard let document = try? JSONParser.parse(bytes, duplicateKeys: .lastWins), let error = document["error"],
            case .int(let code)? = error["code"]
        else { return nil }
        self.code = Int(code)
        message = error["message"]?.stringValue ?? ""
        status = error["status"]?.stringValue ?? ""
        errorCode = nil
        fieldViolations = []
        if case .array(let details)? = error["details"] {
            for detail in details {
                let type = detail["@type"]?.stringValue ?? ""
                if type.hasSuffix("google.firebase.fcm.v1.FcmError"), let code = detail["errorCode"]?.stringValue {
                    errorCode = FCMErrorCode(rawValue: code)
                }
                if type.hasSuffix("google.rpc.BadRequest"), case .array(let violations)? = detail["fieldViolations"] {
                    fieldViolations += violations.compactMap { $0["field"]?.stringValue }
                }
            }
        }
    }

    /// The body as FCM writes it.
    public var json: [UInt8] {
        var details: [JSONValue] = []
        if let errorCode {
            details.append(
                .object([
                    "@type": .string("type.googleapis.com/google.firebase.fcm.v1.FcmError"),
                    "errorCode": .string(errorCode.rawValue),
                ]))
        }
        if !fieldViolations.isEmpty {
            details.append(
                .object([
                    "@type": .string("type.googleapis.com/google.rpc.BadRequest"),
                    "fieldViolations": .array(
                        fieldViolations.map { .object(["field": .string($0), "description": .string(message)]) }),
                ]))
        }
        var error: [String: JSONValue] = [
            "code": .int(Int64(code)), "message": .string(message), "status": .string(status),
        ]
        if !details.isEmpty { error["details"] = .array(details) }
        return JSONWriter.bytes(.object(["error": .object(error)]))
    }

    /// True when FCM says the registration token itself is wrong (INVALID_ARGUMENT naming `message.token`, or
    /// saying "registration token"): the registration is dead, not the message.
    public var isInvalidToken: Bool {
        guard errorCode == .invalidArgument || (errorCode == nil && status == "INVALID_ARGUMENT") else { return false }
        return fieldViolations.contains("message.token") || message.lowercased().contains("registration token")
    }
}

/// What a sender does with an FCM answer, as Google documents it.
public enum FCMAnswerKind: Sendable, Equatable {
    /// 200: FCM took the message (`name` is its id, `projects/{p}/messages/{id}`).
    case sent
    /// UNREGISTERED, or INVALID_ARGUMENT about the token: deactivate the registration, never retry.
    case deactivate
    /// SENDER_ID_MISMATCH, THIRD_PARTY_AUTH_ERROR, PERMISSION_DENIED: the app's credentials or project are wrong;
    /// no retry helps until someone fixes them.
    case misconfigured
    /// 401 without an FCM code: the access token was refused; get a new one and send again (once).
    case reauthenticate
    /// QUOTA_EXCEEDED, UNAVAILABLE, INTERNAL, other 5xx: retry with backoff, after `Retry-After` when given.
    case retry
    /// Any other 4xx (an invalid message): not retried.
    case refused

    /// Classifies an answer.
    public static func classify(status: Int, body: FCMErrorBody?) -> FCMAnswerKind {
        if status == 200 { return .sent }
        if let body, body.isInvalidToken { return .deactivate }
        switch body?.errorCode {
        case .unregistered?: return .deactivate
        case .senderIDMismatch?, .thirdPartyAuthError?: return .misconfigured
        case .quotaExceeded?, .unavailable?, .internal?: return .retry
        default: break
        }
        switch status {
        case 401: return .reauthenticate
        // A 404 without UNREGISTERED is a wrong URL or project, not a dead token: never a deactivation.
        case 403, 404: return .misconfigured
        case 429, 500...599: return .retry
        default: return .refused
        }
    }
}

/// One message's fate: what FCM answered last, after how many attempts, or why nothing was answered.
public struct FCMSendResult: Sendable, Equatable {
    public var token: String
    /// The HTTP status of the last answer; nil when none came.
    public var status: Int?
    /// FCM's error code, when the answer had one.
    public var errorCode: FCMErrorCode?
    /// Google's `error.status` (`UNAUTHENTICATED`, `PERMISSION_DENIED`...), when the answer had one.
    public var googleStatus: String?
    /// `Retry-After` of the last answer, in seconds.
    public var retryAfter: Double?
    /// Google's `error.message`, or a sentence of ours for a transport failure.
    public var message: String?
    /// The message's id (`projects/{project}/messages/{id}`) when FCM took it.
    public var name: String?
    public var attempts: Int
    /// Why no answer came (connection refused, TLS, timeout), when none did.
    public var transportError: String?
    /// How the last answer was classified.
    public var kind: FCMAnswerKind?

    public init(
        token: String, status: Int? = nil, errorCode: FCMErrorCode? = nil, message: String? = nil,
        name: String? = nil, attempts: Int, transportError: String? = nil, kind: FCMAnswerKind? = nil
    ) {
        self.token = token
        self.status = status
        self.errorCode = errorCode
        self.message = message
        self.name = name
        self.attempts = attempts
        self.transportError = transportError
        self.kind = kind
    }

    /// FCM took the message.
    public var succeeded: Bool { status == 200 }
    /// The reason shown in results: FCM's code, else the `google.rpc` status, else nil.
    public var reason: String? { errorCode?.rawValue }
}
