import APNsCore
import Crypto
import Essentials
import Foundation
import Synchronization
import Testing

/// A clock the test moves by hand.
final class ManualClock: WallClock {
    let seconds: Mutex<Double>
    init(_ start: Double) { seconds = Mutex(start) }
    func now() -> Date { Date(timeIntervalSince1970: seconds.withLock { $0 }) }
    func advance(_ delta: Double) { seconds.withLock { $0 += delta } }
}

let token64 = String(repeating: "ab", count: 32)

func request(
    token: String = token64, topic: String? = "com.example.app", pushType: String? = "alert", priority: Int? = nil,
    expiration: String? = nil, collapseID: String? = nil, apnsID: String? = nil, payloadSize: Int? = nil
) -> APNsWireRequest {
    var payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
    if let payloadSize { payload = sizedPayload(payloadSize) }
    return APNsWireRequest(
        deviceToken: token, topic: topic, pushType: pushType, priority: priority.map(String.init),
        expiration: expiration,
        collapseID: collapseID, apnsID: apnsID, payload: payload)
}

/// A valid JSON payload of exactly `size` bytes.
func sizedPayload(_ size: Int) -> [UInt8] {
    let prefix = #"{"aps":{"alert":"hi"},"pad":""#
    let suffix = #""}"#
    return Array((prefix + String(repeating: "x", count: size - prefix.utf8.count - suffix.utf8.count) + suffix).utf8)
}

@Suite("APNs reasons")
struct APNsReasonTests {
    @Test("known reasons map to Apple's strings and statuses; others are kept as unknown")
    func mapping() {
        #expect(APNsReason(rawValue: "Unregistered") == .unregistered)
        #expect(APNsReason.unregistered.status == 410)
        #expect(APNsReason(rawValue: "TooManyRequests").status == 429)
        #expect(APNsReason(rawValue: "PayloadTooLarge").status == 413)
        #expect(APNsReason(rawValue: "BrandNewReason") == .unknown("BrandNewReason"))
        #expect(APNsReason.unknown("BrandNewReason").rawValue == "BrandNewReason")
        #expect(APNsReason.badDeviceToken.hint?.contains("sandbox") == true)
    }

    @Test("hints name what the user can change where the push came from: the sender's flags or the service's settings")
    func hintsFitTheCommand() {
        let reasons: [APNsReason] = [
            .badDeviceToken, .deviceTokenNotForTopic, .invalidProviderToken, .badPriority, .unregistered,
        ]
        for reason in reasons {
            let service = reason.hint(for: .service) ?? ""
            #expect(!service.isEmpty)
            // The service's deliveries have no flags to pass.
            #expect(!service.contains("--"), "\(reason): \(service)")
        }
        #expect(APNsReason.badDeviceToken.hint(for: .sender)?.contains("--production or --sandbox") == true)
        #expect(APNsReason.badDeviceToken.hint(for: .service)?.contains("\"environment\"") == true)
        #expect(APNsReason.invalidProviderToken.hint(for: .service)?.contains("ENRICH_APNS_KEY_ID") == true)
        #expect(APNsReason.deviceTokenNotForTopic.hint(for: .service)?.contains("registration's topic") == true)
    }

    @Test("one rule for the token format and the reasons that invalidate a token")
    func tokenRules() {
        #expect(DeviceTokenFormat.isValid(String(repeating: "aB", count: 32)))
        #expect(!DeviceTokenFormat.isValid(String(repeating: "a", count: 63)))
        #expect(!DeviceTokenFormat.isValid(String(repeating: "g", count: 64)))
        #expect(APNsValidator.isValidDeviceToken(String(repeating: "0", count: 200)))
        #expect(!APNsValidator.isValidDeviceToken(String(repeating: "0", count: 202)))
        #expect(APNsEnvironmentName.production.baseURL == "https://api.push.apple.com")
        #expect(PushType.background.requiredPriority == .considerate)
        #expect(PushType.alert.requiredPriority == nil)
    }

    @Test("a typed request is written with Apple's header values, and typed values refuse what Apple refuses")
    func typedVocabulary() {
        let typed = APNsRequest(
            deviceToken: token64, topic: "com.example.app", pushType: .background, priority: .considerate,
            expiration: APNsExpiration(epochSeconds: 1_700_000_000), collapseID: "c", payload: [0x7B, 0x7D])
        let wire = typed.wire
        #expect(wire.pushType == "background")
        #expect(wire.priority == "5")
        #expect(wire.expiration == "1700000000")
        #expect(wire.collapseID == "c")
        #expect(APNsPriority(header: "7") == nil)
        #expect(APNsPriority(header: "1") == .low)
        #expect(APNsExpiration(epochSeconds: -1) == nil)
        #expect(APNsExpiration(header: "+5") == nil)
        #expect(APNsExpiration(header: "0") == .immediately)
        #expect(APNsExpiration.immediately.hasPassed(at: 9e9) == false)
        #expect(APNsExpiration(epochSeconds: 10)!.hasPassed(at: 11.5))
        #expect(!APNsExpiration(epochSeconds: 11)!.hasPassed(at: 11.5))
        // apns-id: the canonical 8-4-4-4-12 form only, hex of either case.
        #expect(APNsValidator.isValidAPNsID("123e4567-e89b-12d3-a456-426614174000"))
        #expect(APNsValidator.isValidAPNsID("123E4567-E89B-12D3-A456-426614174000"))
        #expect(!APNsValidator.isValidAPNsID("123e4567e-89b-12d3-a456-426614174000"))
        #expect(!APNsValidator.isValidAPNsID("123e4567-e89b-12d3-a456-42661417400"))
        #expect(!APNsValidator.isValidAPNsID("123e4567-e89b-12d3-a456-4266141740000"))
        #expect(!APNsValidator.isValidAPNsID("123e4567-e89b-12d3-a456-42661417400g"))
        #expect(!APNsValidator.isValidAPNsID("123e4567-e89b-12d3-a456-4266141740é"))
        #expect(!APNsValidator.isValidAPNsID(""))
        // The enrichment family's limit is the alert push's, written once in APNsCore.
        #expect(PushType.alert.maximumPayloadSize == 4096)
        #expect(PushType.voip.maximumPayloadSize == 5120)
    }
}

@Suite("APNs request rules")
struct APNsValidatorTests {
    func reason(_ r: APNsWireRequest) -> APNsReason? { APNsValidator.violation(of: r)?.reason }

    @Test("a well-formed request passes")
    func valid() {
        #expect(reason(request(priority: 10, expiration: "0", collapseID: "c", apnsID: UUID().uuidString)) == nil)
    }

    @Test("device token must be an even number of 64 to 200 hex digits")
    func tokens() {
        #expect(reason(request(token: String(token64.dropLast()))) == .badDeviceToken)
        #expect(reason(request(token: String(token64.dropLast(2)))) == .badDeviceToken)
        #expect(reason(request(token: token64 + "0")) == .badDeviceToken)
        #expect(reason(request(token: String(repeating: "ab", count: 50))) == nil)
        #expect(reason(request(token: String(repeating: "ab", count: 101))) == .badDeviceToken)
        #expect(reason(request(token: String(token64.dropLast()) + "g")) == .badDeviceToken)
        #expect(reason(request(token: "")) == .missingDeviceToken)
        #expect(reason(request(token: token64.uppercased())) == nil)
    }

    @Test("topic, push type and priority rules")
    func headers() {
        #expect(reason(request(topic: nil)) == .missingTopic)
        #expect(reason(request(pushType: "telepathy")) == .invalidPushType)
        #expect(reason(request(priority: 7)) == .badPriority)
        #expect(reason(request(pushType: "background", priority: 10)) == .badPriority)
        #expect(reason(request(pushType: "background", priority: 5)) == nil)
        #expect(reason(request(pushType: "voip")) == .badTopic)
        #expect(reason(request(topic: "com.example.app.voip", pushType: "voip")) == nil)
        #expect(reason(request(expiration: "tomorrow")) == .badExpirationDate)
        #expect(reason(request(apnsID: "not-a-uuid")) == .badMessageId)
    }

    @Test("collapse id: 64 bytes pass, 65 fail")
    func collapseID() {
        #expect(reason(request(collapseID: String(repeating: "c", count: 64))) == nil)
        #expect(reason(request(collapseID: String(repeating: "c", count: 65))) == .badCollapseId)
    }

    @Test("payload: 4096 bytes pass, 4097 fail; voip allows 5120")
    func payloadSize() {
        #expect(sizedPayload(4096).count == 4096)
        #expect(reason(request(payloadSize: 4096)) == nil)
        #expect(reason(request(payloadSize: 4097)) == .payloadTooLarge)
        #expect(reason(request(topic: "a.voip", pushType: "voip", payloadSize: 5120)) == nil)
        #expect(reason(request(topic: "a.voip", pushType: "voip", payloadSize: 5121)) == .payloadTooLarge)
    }

    @Test("topic suffixes per push type")
    func suffixes() {
        #expect(PushType.voip.topic(forBundle: "com.example.app") == "com.example.app.voip")
        #expect(PushType.voip.topic(forBundle: "com.example.app.voip") == "com.example.app.voip")
        #expect(PushType.liveactivity.topic(forBundle: "com.a") == "com.a.push-type.liveactivity")
        #expect(PushType.alert.topic(forBundle: "com.a") == "com.a")
    }
}

@Suite("Provider tokens")
struct APNsJWTTests {
    let key = P256.Signing.PrivateKey()

    @Test(
        "a validly signed token with an extreme iat is refused, never an overflow",
        arguments: [Int64.min, Int64.min + 1, Int64.max, Int64.max - 59])
    func extremeIssuedAt(iat: Int64) throws {
        let jwt = try APNsJWT.sign(keyID: "K", teamID: "T", issuedAt: iat, key: key)
        for now in [Int64.min, 0, 1_700_000_000, Int64.max] {
            let age = Int128(now) - Int128(iat)
            do {
                _ = try APNsJWT.verify(jwt, publicKey: key.publicKey, expectedKeyID: nil, expectedTeamID: nil, now: now)
                #expect((-60...3600).contains(age), "accepted iat \(iat) at \(now)")
            } catch {
                #expect(
                    error.reason == (age > 3600 ? .expiredProviderToken : .invalidProviderToken), "iat \(iat) at \(now)"
                )
                #expect(!(-60...3600).contains(age))
            }
        }
    }

    @Test("a signed token verifies, with kid, iss and whole-second iat")
    func roundTrip() throws {
        let jwt = try APNsJWT.sign(keyID: "KEY123", teamID: "TEAM456", issuedAt: 1_700_000_000, key: key)
        let claims = try APNsJWT.verify(
            jwt, publicKey: key.publicKey, expectedKeyID: "KEY123", expectedTeamID: "TEAM456", now: 1_700_000_100)
        #expect(claims == .init(keyID: "KEY123", teamID: "TEAM456", issuedAt: 1_700_000_000))
        let payload = String(jwt.split(separator: ".")[1])
        let claimsJSON = try JSONParser.parse(
            Data(base64Encoded: payload.padding(toLength: (payload.count + 3) / 4 * 4, withPad: "=", startingAt: 0))!)
        #expect(claimsJSON["iat"] == .int(1_700_000_000))
    }

    @Test("wrong key, tampering, old iat and foreign kid are refused with Apple's reasons")
    func refusals() throws {
        let jwt = try APNsJWT.sign(keyID: "K", teamID: "T", issuedAt: 1_000, key: key)
        #expect(throws: APNsValidator.Violation.self) {
            try APNsJWT.verify(
                jwt, publicKey: P256.Signing.PrivateKey().publicKey, expectedKeyID: nil, expectedTeamID: nil, now: 1_000
            )
        }
        let parts = jwt.split(separator: ".")
        let tampered = parts[0] + "." + APNsJWT.base64URL(Data(#"{"iss":"X","iat":1000}"#.utf8)) + "." + parts[2]
        #expect(
            throws: APNsValidator.Violation(
                reason: .invalidProviderToken,
                message: "the provider token's signature does not verify with the configured key")
        ) {
            try APNsJWT.verify(tampered, publicKey: key.publicKey, expectedKeyID: nil, expectedTeamID: nil, now: 1_000)
        }
        // Exactly one hour old is still accepted; one second more is expired.
        #expect(throws: Never.self) {
            try APNsJWT.verify(jwt, publicKey: key.publicKey, expectedKeyID: nil, expectedTeamID: nil, now: 4_600)
        }
        do {
            _ = try APNsJWT.verify(jwt, publicKey: key.publicKey, expectedKeyID: nil, expectedTeamID: nil, now: 4_601)
            Issue.record("expected ExpiredProviderToken")
        } catch { #expect(error.reason == .expiredProviderToken) }
        do {
            _ = try APNsJWT.verify(
                jwt, publicKey: key.publicKey, expectedKeyID: "OTHER", expectedTeamID: nil, now: 1_000)
            Issue.record("expected UnrelatedKeyIdInToken")
        } catch { #expect(error.reason == .unrelatedKeyIdInToken) }
    }

    @Test("one token is reused until it is 50 minutes old, then replaced")
    func tokenReuse() throws {
        let clock = ManualClock(1_700_000_000.7)
        let manager = APNsTokenManager(keyID: "K", teamID: "T", key: key, clock: clock)
        let first = try manager.token()
        clock.advance(49 * 60 + 59)
        #expect(try manager.token() == first)
        clock.advance(1)
        let second = try manager.token()
        #expect(second != first)
        let claims = try APNsJWT.verify(
            second, publicKey: key.publicKey, expectedKeyID: "K", expectedTeamID: "T", now: 1_700_003_000)
        #expect(claims.issuedAt == 1_700_003_000)
        // After invalidate() the next call signs again: with the clock unchanged the claims are equal.
        manager.invalidate()
        let third = try manager.token()
        #expect(
            try APNsJWT.verify(
                third, publicKey: key.publicKey, expectedKeyID: "K", expectedTeamID: "T", now: 1_700_003_000
            ).issuedAt == 1_700_003_000)
    }

    @Test("an Apple-style .p8 (PKCS#8 PEM) key loads")
    func p8() throws {
        let pem = key.pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(try APNsTokenManager.loadKey(pem: pem).publicKey.rawRepresentation == key.publicKey.rawRepresentation)
    }
}

@Suite("Retry rules")
struct RetryPolicyTests {
    let policy = RetryPolicy(maxAttempts: 4, baseDelay: 0.5, maxDelay: 1.5)

    @Test("never retried: BadDeviceToken, Unregistered, ExpiredToken, PayloadTooLarge; nor other 4xx")
    func permanent() {
        for (status, reason) in [
            (400, APNsReason.badDeviceToken), (410, .unregistered), (410, .expiredToken), (413, .payloadTooLarge),
            (400, .badTopic), (403, .invalidProviderToken),
        ] {
            #expect(policy.delay(afterAttempt: 1, status: status, reason: reason) == nil, "\(reason)")
        }
    }

    @Test("429 and 5xx back off exponentially up to the cap and the attempt limit")
    func backoff() {
        #expect(policy.delay(afterAttempt: 1, status: 429, reason: .tooManyRequests) == 0.5)
        #expect(policy.delay(afterAttempt: 2, status: 500, reason: .internalServerError) == 1.0)
        #expect(policy.delay(afterAttempt: 3, status: 503, reason: .serviceUnavailable) == 1.5)
        #expect(policy.delay(afterAttempt: 4, status: 503, reason: .serviceUnavailable) == nil)
    }
}

@Suite("Payload stamping")
struct PayloadStampTests {
    @Test("{{now}} placeholders become integers; --stamp-now forces aps.timestamp")
    func stamping() throws {
        let value = try JSONParser.parse(
            Data(#"{"aps":{"timestamp":"{{now}}","alert":"a"},"list":["{{now}}"],"timestamp":"{{now_string}}"}"#.utf8))
        let stamped = PayloadStamp.stamp(value, now: 42)
        #expect(stamped["timestamp"] == .string("42"))
        #expect(stamped["aps"]?["timestamp"] == .int(42))
        #expect(stamped["list"] == .array([.int(42)]))
        let forced = PayloadStamp.stamp(
            try JSONParser.parse(Data(#"{"aps":{"timestamp":1}}"#.utf8)), now: 7, forceTimestamp: true)
        #expect(forced["aps"]?["timestamp"] == .int(7))
    }
}

@Suite("Live Activity payloads")
struct LiveActivityPayloadTests {
    func check(_ aps: String) -> String? {
        do throws(LiveActivityPayload.Problem) {
            _ = try LiveActivityPayload.check(try! JSONParser.parse(Array(#"{"aps":\#(aps)}"#.utf8)))
            return nil
        } catch {
            return error.field
        }
    }

    @Test("Apple's start, update and end are accepted; each broken rule names its field")
    func rules() {
        let start =
            #"{"timestamp":1795000000,"event":"start","content-state":{"eta":9},"alert":{"title":"On its way"},"#
            + #""attributes-type":"DeliveryAttributes","attributes":{"order":"42"},"input-push-token":1}"#
        #expect(check(start) == nil)
        #expect(
            check(
                #"{"timestamp":1795000000,"event":"update","content-state":{},"relevance-score":75,"stale-date":1795000900}"#
            ) == nil)
        #expect(check(#"{"timestamp":1795000000,"event":"end","content-state":{},"dismissal-date":1795000000}"#) == nil)
        #expect(check(#"{"event":"update","content-state":{}}"#) == "aps.timestamp")
        #expect(check(#"{"timestamp":1795000000123,"event":"update","content-state":{}}"#) == "aps.timestamp")
        #expect(check(#"{"timestamp":"1795000000","event":"update","content-state":{}}"#) == "aps.timestamp")
        #expect(check(#"{"timestamp":1795000000,"event":"pause","content-state":{}}"#) == "aps.event")
        #expect(check(#"{"timestamp":1795000000,"event":"update"}"#) == "aps.content-state")
        #expect(
            check(#"{"timestamp":1795000000,"event":"update","content-state":{},"dismissal-date":1}"#)
                == "aps.dismissal-date")
        #expect(
            check(#"{"timestamp":1795000000,"event":"update","content-state":{},"relevance-score":"high"}"#)
                == "aps.relevance-score")
        #expect(
            check(#"{"timestamp":1795000000,"event":"update","content-state":{},"attributes":{}}"#) == "aps.attributes")
        #expect(check(#"{"timestamp":1795000000,"event":"update","content-state":{},"badge":1}"#) == "aps.badge")
        #expect(
            check(#"{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","attributes":{}}"#)
                == "aps.alert")
        #expect(
            check(#"{"timestamp":1,"event":"start","content-state":{},"alert":"x","attributes":{}}"#)
                == "aps.attributes-type")
        #expect(
            check(#"{"timestamp":1,"event":"start","content-state":{},"alert":"x","attributes-type":"A"}"#)
                == "aps.attributes")
        #expect(
            check(
                #"{"timestamp":1,"event":"start","content-state":{},"alert":"x","attributes-type":"A","attributes":{},"input-push-token":2}"#
            ) == "aps.input-push-token")
        #expect(
            check(
                #"{"timestamp":1,"event":"start","content-state":{},"alert":"x","attributes-type":"A","attributes":{},"input-push-token":1,"input-push-channel":"abc="}"#
            ) == "aps.input-push-channel")
    }

    @Test("a broadcast cannot start an activity")
    func broadcast() throws {
        let start = try JSONParser.parse(
            Array(
                #"{"aps":{"timestamp":1,"event":"start","content-state":{},"alert":"x","attributes-type":"A","attributes":{}}}"#
                    .utf8))
        #expect(LiveActivityPayload.broadcastProblem(start)?.contains("cannot start") == true)
        let update = try JSONParser.parse(Array(#"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#.utf8))
        #expect(LiveActivityPayload.broadcastProblem(update) == nil)
    }
}
