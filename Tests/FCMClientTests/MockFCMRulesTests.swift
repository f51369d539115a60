import AsyncHTTPClient
import Essentials
import FCMClient
import FCMCore
import Foundation
import MockFCM
import NIOCore
import NIOHTTP1
import NIOSSL
import TestSupport
import Testing

/// Raw requests to the local FCM, as any client could send them: what it accepts and refuses must be what FCM
/// accepts and refuses (Google's documented message resource and errors).
struct RawFCM {
    let base: String
    let client: HTTPClient
    let accessToken: String

    static func with<T: Sendable>(_ base: String, _ body: (RawFCM) async throws -> T) async throws -> T {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(localCAPEM.utf8)))]
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        do {
            let provider = FCMAccessTokenProvider(
                account: fcmAccount(base: base), exchange: HTTPTokenExchange(client: client))
            let token = try await provider.token().exposed
            let result = try await body(RawFCM(base: base, client: client, accessToken: token))
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    func post(_ body: String, project: String = "demo-project", authorization: String? = nil) async throws -> (
        status: Int, error: FCMErrorBody?, json: JSONValue?
    ) {
        var request = HTTPClientRequest(url: base + "/v1/projects/\(project)/messages:send")
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        if let authorization = authorization ?? Optional("Bearer \(accessToken)"), !authorization.isEmpty {
            request.headers.add(name: "authorization", value: authorization)
        }
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await client.execute(request, timeout: .seconds(10))
        let bytes = Array(buffer: try await response.body.collect(upTo: 1 << 20))
        return (Int(response.status.code), FCMErrorBody(json: bytes), try? JSONParser.parse(bytes))
    }
}

@Suite("The local FCM accepts what FCM accepts")
struct MockFCMRulesTests {
    let token = fcmToken(1)

    @Test("a complete message with every Android option is accepted")
    func accepted() async throws {
        try await withMockFCM { base, _ in
            try await RawFCM.with(base) { fcm in
                let body =
                    #"{"message":{"token":"\#(token)","notification":{"title":"T","body":"B","image":"https://i"},"#
                    + #""data":{"k":"v"},"android":{"priority":"HIGH","ttl":"3.5s","collapse_key":"c","#
                    + #""notification":{"channel_id":"nearby","click_action":"location","notification_count":2}},"#
                    + #""apns":{"payload":{"aps":{}}},"fcm_options":{"analytics_label":"x"}}}"#
                let reply = try await fcm.post(body)
                #expect(reply.status == 200)
                #expect(reply.json?["name"]?.stringValue?.hasPrefix("projects/demo-project/messages/") == true)
                // A topic instead of a token is a message too.
                #expect(try await fcm.post(#"{"message":{"topic":"news","data":{"a":"b"}}}"#).status == 200)
            }
        }
    }

    @Test(
        "each of FCM's refusals, with Google's status and error code",
        arguments: [
            (#"{"message":{"token":"T1","data":{"n":1}}}"#, "message.data[0].value"),
            (#"{"message":{"token":"T1","unknown":1}}"#, "Unknown name \"unknown\""),
            (#"{"message":{"token":"T1","android":{"priority":"URGENT"}}}"#, "message.android.priority"),
            (#"{"message":{"token":"T1","android":{"ttl":"2419201s"}}}"#, "4 weeks"),
            (#"{"message":{"token":"T1","android":{"ttl":"60"}}}"#, "message.android.ttl"),
            (#"{"message":{"token":"T1","topic":"news"}}"#, "Exactly one of"),
            (#"{"message":{"data":{"a":"b"}}}"#, "Exactly one of"),
            (#"{"message":{"token":"T1","data":{"from":"x"}}}"#, "Invalid data payload key: from"),
            (#"{"message":{"token":"T1","notification":{"subtitle":"x"}}}"#, "Unknown name \"subtitle\""),
            (#"{"message":{"token":"bad token"}}"#, "not a valid FCM registration token"),
            (#"{"msg":{}}"#, "Unknown name \"msg\""),
        ])
    func refused(_ body: String, _ says: String) async throws {
        try await withMockFCM { base, _ in
            try await RawFCM.with(base) { fcm in
                let reply = try await fcm.post(body.replacingOccurrences(of: "T1", with: token))
                #expect(reply.status == 400)
                #expect(reply.error?.status == "INVALID_ARGUMENT")
                #expect(reply.error?.errorCode == .invalidArgument)
                #expect(reply.error?.message.contains(says) == true, "\(reply.error?.message ?? "")")
            }
        }
    }

    @Test("field names in lowerCamelCase and null members are read as protobuf's JSON mapping reads them")
    func jsonMapping() async throws {
        try await withMockFCM { base, state in
            try await RawFCM.with(base) { fcm in
                let body =
                    #"{"message":{"token":"\#(token)","data":null,"android":{"collapseKey":"c","ttl":null,"#
                    + #""notification":{"clickAction":"x","notificationCount":"3","bodyLocArgs":["a"]}}},"#
                    + #""validateOnly":true}"#
                let reply = try await fcm.post(body)
                #expect(reply.status == 200, "\(reply.error?.message ?? "")")
                #expect(state.received.last?.validateOnly == true)
                #expect(state.received.last?.message["android"]?["collapse_key"] == .string("c"))
            }
        }
    }

    @Test(
        "android.notification's fields have their types",
        arguments: [
            #""notification_count":"three""#, #""sticky":"yes""#, #""title_loc_args":"a""#, #""channel_id":7"#,
        ])
    func androidNotificationTypes(_ field: String) async throws {
        try await withMockFCM { base, _ in
            try await RawFCM.with(base) { fcm in
                let reply = try await fcm.post(
                    #"{"message":{"token":"\#(token)","android":{"notification":{\#(field)}}}}"#)
                #expect(reply.status == 400)
                #expect(reply.error?.message.contains("message.android.notification.") == true)
            }
        }
    }

    @Test("4,096 payload bytes are accepted, 4,097 refused")
    func sizeBoundary() async throws {
        try await withMockFCM { base, _ in
            try await RawFCM.with(base) { fcm in
                // {"data":{"k":"<value>"}} counts 17 bytes around the value.
                func body(_ size: Int) -> String {
                    #"{"message":{"token":"\#(token)","data":{"k":"\#(String(repeating: "a", count: size - 17))"}}}"#
                }
                #expect(try await fcm.post(body(4096)).status == 200)
                let over = try await fcm.post(body(4097))
                #expect(over.status == 400)
                #expect(over.error?.message.contains("4097") == true)
            }
        }
    }

    @Test("no token is 401, another token's project is 403, both in Google's shape")
    func authentication() async throws {
        try await withMockFCM { base, _ in
            try await RawFCM.with(base) { fcm in
                let body = #"{"message":{"token":"\#(token)"}}"#
                let missing = try await fcm.post(body, authorization: "")
                #expect(missing.status == 401)
                #expect(missing.error?.status == "UNAUTHENTICATED")
                #expect(missing.error?.errorCode == nil)
                let forged = try await fcm.post(body, authorization: "Bearer ya29.forged")
                #expect(forged.status == 401)
                let elsewhere = try await fcm.post(body, project: "other-project")
                #expect(elsewhere.status == 403)
                #expect(elsewhere.error?.status == "PERMISSION_DENIED")
            }
        }
    }
}
