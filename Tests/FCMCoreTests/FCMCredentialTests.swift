import Essentials
import FCMCore
import Foundation
import Testing
import _CryptoExtras

private let keyPEM = try! _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation

private func keyFile(_ members: [String: JSONValue]) -> [UInt8] {
    JSONWriter.bytes(.object(members))
}

private let complete: [String: JSONValue] = [
    "type": "service_account", "project_id": "demo-project", "private_key_id": "abc123",
    "private_key": .string(keyPEM), "client_email": "push@demo-project.iam.gserviceaccount.com",
    "client_id": "1234567890", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
    "token_uri": "https://oauth2.googleapis.com/token",
]

extension JSONValue: ExpressibleByStringLiteral {
    init(stringLiteral value: String) { self = .string(value) }
}

@Suite("FCM service accounts and the RS256 assertion")
struct FCMCredentialTests {
    @Test("a key file as Google's console writes it is read, and its key is never described")
    func readsKeyFile() throws {
        let account = try FCMServiceAccount(json: keyFile(complete))
        #expect(account.projectID == "demo-project")
        #expect(account.clientEmail == "push@demo-project.iam.gserviceaccount.com")
        #expect(account.privateKeyID == "abc123")
        #expect(account.tokenURI == "https://oauth2.googleapis.com/token")
        let described = "\(account) \(String(reflecting: account))"
        #expect(!described.contains("PRIVATE KEY"))
        #expect(!described.contains(keyPEM.split(separator: "\n")[1]))
        #expect(described.contains("<redacted>"))
    }

    @Test("a file without token_uri uses Google's endpoint")
    func defaultTokenURI() throws {
        var members = complete
        members["token_uri"] = nil
        #expect(try FCMServiceAccount(json: keyFile(members)).tokenURI == "https://oauth2.googleapis.com/token")
    }

    @Test(
        "each missing member is named",
        arguments: ["project_id", "client_email", "private_key"])
    func missingMember(_ name: String) {
        var members = complete
        members[name] = nil
        #expect(throws: FCMCredentialProblem.self) { try FCMServiceAccount(json: keyFile(members)) }
        do { _ = try FCMServiceAccount(json: keyFile(members)) } catch {
            #expect(error.message.hasPrefix(name))
        }
    }

    @Test("a key of another type, a non-RSA key and a non-JSON file are refused with what to do")
    func refusals() {
        var other = complete
        other["type"] = "authorized_user"
        do { _ = try FCMServiceAccount(json: keyFile(other)) } catch {
            #expect(error.message.contains("service_account"))
        }
        var notRSA = complete
        notRSA["private_key"] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        do {
            _ = try FCMServiceAccount(json: keyFile(notRSA))
            Issue.record("a broken key was accepted")
        } catch {
            #expect(error.message.contains("RSA private key"))
            #expect(!error.message.contains("AAAA"))
        }
        #expect(throws: FCMCredentialProblem.self) { try FCMServiceAccount(json: Array("not json".utf8)) }
    }

    @Test("the assertion carries exactly Google's claims and verifies with the public key")
    func assertionClaims() throws {
        let account = try FCMServiceAccount(json: keyFile(complete))
        let jwt = try FCMAssertion.sign(account, issuedAt: 1_800_000_000)
        let parts = jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let header = String(decoding: Base64URL.decode(parts[0])!, as: UTF8.self)
        let claims = String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self)
        #expect(header == #"{"alg":"RS256","typ":"JWT","kid":"abc123"}"#)
        #expect(
            claims
                == #"{"iss":"push@demo-project.iam.gserviceaccount.com","scope":"https://www.googleapis.com/auth/firebase.messaging","aud":"https://oauth2.googleapis.com/token","iat":1800000000,"exp":1800003600}"#
        )
        // An RSA PKCS#1 v1.5 signature of a 2048-bit key is 256 bytes.
        #expect(Base64URL.decode(parts[2])?.count == 256)
        let verified = try FCMAssertion.verify(
            jwt, publicKey: account.signingKey().publicKey, audience: account.tokenURI, now: 1_800_000_100)
        #expect(verified.issuer == account.clientEmail)
        #expect(verified.scope == FCMAssertion.messagingScope)
        #expect(verified.expiresAt == 1_800_003_600)
    }

    @Test("verification refuses another key, another audience, a tampered claim, an expired or too long-lived one")
    func assertionRefusals() throws {
        let account = try FCMServiceAccount(json: keyFile(complete))
        let jwt = try FCMAssertion.sign(account, issuedAt: 1_800_000_000)
        let key = try account.signingKey().publicKey
        let otherKey = try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey
        #expect(throws: FCMAssertion.Refusal.self) {
            try FCMAssertion.verify(jwt, publicKey: otherKey, audience: account.tokenURI, now: 1_800_000_000)
        }
        #expect(throws: FCMAssertion.Refusal.self) {
            try FCMAssertion.verify(jwt, publicKey: key, audience: "https://elsewhere/token", now: 1_800_000_000)
        }
        // exp is exclusive: at exp the assertion is dead, a second before it is alive.
        #expect(throws: FCMAssertion.Refusal.self) {
            try FCMAssertion.verify(jwt, publicKey: key, audience: account.tokenURI, now: 1_800_003_600)
        }
        _ = try FCMAssertion.verify(jwt, publicKey: key, audience: account.tokenURI, now: 1_800_003_599)
        // 3600 s of life is Google's maximum; 3601 is refused.
        let hour = try FCMAssertion.sign(account, issuedAt: 1_800_000_000, lifetime: 3600)
        _ = try FCMAssertion.verify(hour, publicKey: key, audience: account.tokenURI, now: 1_800_000_000)
        let tooLong = try FCMAssertion.sign(account, issuedAt: 1_800_000_000, lifetime: 3601)
        #expect(throws: FCMAssertion.Refusal.self) {
            try FCMAssertion.verify(tooLong, publicKey: key, audience: account.tokenURI, now: 1_800_000_000)
        }
        var parts = jwt.split(separator: ".").map(String.init)
        let forged = Array(
            #"{"iss":"someone@else.iam.gserviceaccount.com","scope":"x","aud":"https://oauth2.googleapis.com/token","iat":1800000000,"exp":1800003600}"#
                .utf8)
        parts[1] = Base64URL.encode(forged, padded: false)
        #expect(throws: FCMAssertion.Refusal.self) {
            try FCMAssertion.verify(
                parts.joined(separator: "."), publicKey: key, audience: account.tokenURI, now: 1_800_000_000)
        }
    }
}
