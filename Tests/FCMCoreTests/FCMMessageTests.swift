import Essentials
import FCMCore
import Foundation
import Testing

private func parse(_ text: String) -> JSONValue { try! JSONParser.parse(Array(text.utf8)) }
private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

@Suite("FCM messages from APNs payloads")
struct FCMMessageTests {
    let now: Int64 = 1_800_000_000

    @Test("an enriched location push becomes its Android twin, byte for byte")
    func locationPush() throws {
        let payload = parse(
            #"{"aps":{"alert":{"title":"Nearby","subtitle":"Your area","body":"City = London \nZipCode = W1 \nDistance = 135.2"},"#
                + #""mutable-content":1,"category":"location","sound":"default","badge":3,"timestamp":1799999990},"#
                + #""location":"1","trip":{"id":7}}"#)
        let message = try FCMMessage.fromAPNs(
            payload: payload, token: "tok:en",
            options: FCMDeliveryOptions(
                apnsPriority: 10, apnsExpiration: now + 3600, collapseID: "trip-7", image: "https://maps/x.png"),
            now: now)
        let expected =
            #"{"message":{"android":{"collapse_key":"trip-7","notification":{"click_action":"location","#
            + #""notification_count":3,"sound":"default"},"priority":"HIGH","ttl":"3600s"},"#
            + #""data":{"location":"1","subtitle":"Your area","trip":"{\"id\":7}"},"#
            + #""notification":{"body":"City = London \nZipCode = W1 \nDistance = 135.2","image":"https://maps/x.png","#
            + #""title":"Nearby"},"token":"tok:en"}}"#
        #expect(text(message.requestBody()) == expected)
        #expect(text(message.requestBody(validateOnly: true)).hasSuffix(#","validate_only":true}"#))
    }

    @Test("a data-only message carries title, subtitle, body and image as data, and nothing to show")
    func dataOnly() throws {
        let payload = parse(#"{"aps":{"alert":{"title":"T","subtitle":"S","body":"B"},"badge":1},"k":"v"}"#)
        let message = try FCMMessage.fromAPNs(
            payload: payload, token: "t", options: FCMDeliveryOptions(dataOnly: true, image: "https://i"), now: now)
        #expect(message.notification == nil)
        #expect(message.android.notification.isEmpty)
        #expect(message.data == ["title": "T", "subtitle": "S", "body": "B", "image": "https://i", "k": "v"])
        // A push with no alert (a background push) is data-only by itself.
        let silent = try FCMMessage.fromAPNs(
            payload: parse(#"{"aps":{"content-available":1},"sync":"now"}"#), token: "t", now: now)
        #expect(silent.notification == nil)
        #expect(silent.data == ["sync": "now"])
    }

    @Test("a string alert is the body; localized keys and arguments go to android.notification")
    func alertForms() throws {
        let plain = try FCMMessage.fromAPNs(payload: parse(#"{"aps":{"alert":"Hello"}}"#), token: "t", now: now)
        #expect(plain.notification == FCMMessage.Notification(title: nil, body: "Hello", image: nil))
        let localized = try FCMMessage.fromAPNs(
            payload: parse(
                #"{"aps":{"alert":{"title-loc-key":"T_KEY","title-loc-args":["a"],"loc-key":"B_KEY","loc-args":["b",2]}}}"#
            ), token: "t", now: now)
        #expect(localized.android.notification["title_loc_key"] == .string("T_KEY"))
        #expect(localized.android.notification["body_loc_key"] == .string("B_KEY"))
        #expect(localized.android.notification["body_loc_args"] == .array([.string("b"), .string("2")]))
        #expect(throws: FCMMessageProblem.self) {
            try FCMMessage.fromAPNs(
                payload: parse(#"{"aps":{"alert":{"loc-key":"K","loc-args":[{}]}}}"#), token: "t", now: now)
        }
    }

    @Test(
        "priority: 10 is HIGH, 5 and 1 are NORMAL, none leaves FCM's default",
        arguments: [
            (10, "HIGH"), (5, "NORMAL"), (1, "NORMAL"),
        ])
    func priority(_ apns: Int, _ android: String) throws {
        let message = try FCMMessage.fromAPNs(
            payload: parse(#"{"aps":{"alert":"x"}}"#), token: "t", options: FCMDeliveryOptions(apnsPriority: apns),
            now: now)
        #expect(message.android.priority?.rawValue == android)
        let none = try FCMMessage.fromAPNs(payload: parse(#"{"aps":{"alert":"x"}}"#), token: "t", now: now)
        #expect(none.android.priority == nil)
        #expect(!text(none.requestBody()).contains("priority"))
    }

    @Test("expiration becomes a time to live: 0 is now or never, the past is 0, beyond four weeks is four weeks")
    func timeToLive() throws {
        func ttl(_ expiration: Int64?) throws -> Int64? {
            try FCMMessage.fromAPNs(
                payload: parse(#"{"aps":{"alert":"x"}}"#), token: "t",
                options: FCMDeliveryOptions(apnsExpiration: expiration), now: now
            ).android.ttlSeconds
        }
        #expect(try ttl(nil) == nil)
        #expect(try ttl(0) == 0)
        #expect(try ttl(now - 5) == 0)
        #expect(try ttl(now + 1) == 1)
        #expect(try ttl(now + 2_419_200) == 2_419_200)
        #expect(try ttl(now + 2_419_201) == 2_419_200)
    }

    @Test(
        "reserved data keys are refused before sending",
        arguments: ["from", "message_type", "google.x", "gcm.notification.x"])
    func reservedKeys(_ key: String) {
        let payload = JSONValue.object(["aps": .object(["alert": .string("x")]), key: .string("v")])
        do {
            _ = try FCMMessage.fromAPNs(payload: payload, token: "t", now: now)
            Issue.record("\(key) was accepted")
        } catch {
            #expect(error.field == key)
        }
    }

    @Test("keys that only look reserved are sent (the rule is Google's, case-sensitive)")
    func nearlyReservedKeys() throws {
        let payload = JSONValue.object([
            "aps": .object(["alert": .string("x")]), "googleMapsUrl": .string("u"), "FROM": .string("f"),
            "gcm_id": .string("g"),
        ])
        let message = try FCMMessage.fromAPNs(payload: payload, token: "t", now: now)
        #expect(message.data == ["googleMapsUrl": "u", "FROM": "f", "gcm_id": "g"])
    }

    @Test("4,096 payload bytes are sent; 4,097 are refused with the size")
    func sizeBoundary() throws {
        // {"data":{"k":"<n bytes>"}}: 17 bytes around the value.
        func message(_ size: Int) throws -> FCMMessage {
            try FCMMessage.fromAPNs(
                payload: .object(["aps": .object([:]), "k": .string(String(repeating: "a", count: size - 17))]),
                token: "t", now: now)
        }
        #expect(try message(4096).payloadSize == 4096)
        do {
            _ = try message(4097)
            Issue.record("4097 bytes were accepted")
        } catch let error as FCMMessageProblem {
            #expect(error.message.contains("4097 bytes"))
        }
    }
}

@Suite("FCM answers")
struct FCMAnswerTests {
    @Test("Google's documented error body is read: code, status, FCM error code")
    func readsErrorBody() throws {
        let body = Array(
            #"""
            {
              "error": {
                "code": 404,
                "message": "Requested entity was not found.",
                "status": "NOT_FOUND",
                "details": [
                  {
                    "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                    "errorCode": "UNREGISTERED"
                  }
                ]
              }
            }
            """#.utf8)
        let error = try #require(FCMErrorBody(json: body))
        #expect(error.code == 404)
        #expect(error.status == "NOT_FOUND")
        #expect(error.errorCode == .unregistered)
        #expect(FCMAnswerKind.classify(status: 404, body: error) == .deactivate)
        #expect(FCMErrorBody(json: Array("<html>".utf8)) == nil)
        #expect(FCMErrorCode(rawValue: "NEW_CODE") == .unknown("NEW_CODE"))
    }

    @Test(
        "each answer is handled as Google says",
        arguments: [
            (200, nil, nil, FCMAnswerKind.sent),
            (404, "UNREGISTERED", nil, .deactivate),
            (400, "INVALID_ARGUMENT", "message.token", .deactivate),
            (400, "INVALID_ARGUMENT", "message.data[0].value", .refused),
            (403, "SENDER_ID_MISMATCH", nil, .misconfigured),
            (401, "THIRD_PARTY_AUTH_ERROR", nil, .misconfigured),
            (401, nil, nil, .reauthenticate),
            (403, nil, nil, .misconfigured),
            (429, "QUOTA_EXCEEDED", nil, .retry),
            (503, "UNAVAILABLE", nil, .retry),
            (500, "INTERNAL", nil, .retry),
            (502, nil, nil, .retry),
            (404, nil, nil, .misconfigured),
            (400, nil, nil, .refused),
        ] as [(Int, String?, String?, FCMAnswerKind)])
    func classification(_ status: Int, _ code: String?, _ field: String?, _ kind: FCMAnswerKind) {
        let body =
            status == 200
            ? nil
            : FCMErrorBody(
                code: status, message: "m", status: "S", errorCode: code.map(FCMErrorCode.init(rawValue:)),
                fieldViolations: field.map { [$0] } ?? [])
        #expect(FCMAnswerKind.classify(status: status, body: body) == kind)
    }

    @Test("an INVALID_ARGUMENT that says 'registration token' is about the token")
    func invalidTokenByMessage() {
        let error = FCMErrorBody(
            code: 400, message: "The registration token is not a valid FCM registration token",
            status: "INVALID_ARGUMENT", errorCode: .invalidArgument)
        #expect(error.isInvalidToken)
        let round = FCMErrorBody(json: error.json)
        #expect(round == error)
    }

    @Test("backoff doubles, honours Retry-After (seconds or a date), waits a minute after an unexplained 429")
    func retryPolicy() {
        let policy = FCMRetryPolicy(maximumAttempts: 4, initialBackoff: 1, maximumBackoff: 60, quotaBackoff: 60)
        #expect(policy.delay(afterAttempt: 1, status: 503, retryAfter: nil) == 1)
        #expect(policy.delay(afterAttempt: 2, status: 503, retryAfter: nil) == 2)
        #expect(policy.delay(afterAttempt: 3, status: 500, retryAfter: nil) == 4)
        #expect(policy.delay(afterAttempt: 4, status: 500, retryAfter: nil) == nil)
        #expect(policy.delay(afterAttempt: 1, status: 429, retryAfter: nil) == 60)
        #expect(policy.delay(afterAttempt: 1, status: 429, retryAfter: 7) == 7)
        // Retry-After is never shortened, even past the backoff's ceiling.
        #expect(policy.delay(afterAttempt: 1, status: 503, retryAfter: 600) == 600)
        #expect(FCMRetryPolicy.retryAfterSeconds("30", now: 0) == 30)
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example date).
        #expect(FCMRetryPolicy.retryAfterSeconds("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_767) == 10)
        #expect(FCMRetryPolicy.retryAfterSeconds("soon", now: 0) == nil)
    }
}
