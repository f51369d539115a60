import APNsClient
import APNsCore
import Crypto
import Foundation
import MockAPNs
import NIOCore
import Synchronization
import TestSupport
import Testing

@Suite("Sender against the mock APNs (HTTP/2 + TLS, token auth)")
struct SenderAgainstMockTests {
    @Test("a push is delivered with every header, and the mock records it")
    func delivered() async throws {
        try await withMock { base, state in
            try await withSender(try makeSender(base)) { sender in
                let id = UUID().uuidString.lowercased()
                let result = await sender.send(push(priority: .considerate, collapseID: "news", apnsID: id))
                #expect(result.status == 200)
                #expect(result.apnsID == id)
                #expect(result.attempts == 1)
                let received = try #require(state.receivedPushes.first)
                #expect(received.deviceToken == token64)
                #expect(received.topic == "com.example.app")
                #expect(received.pushType == "alert")
                #expect(received.priority == "5")
                #expect(received.collapseID == "news")
                #expect(received.payload == Array(#"{"aps":{"alert":"hi"}}"#.utf8))
            }
        }
    }

    @Test("without apns-id the mock assigns an upper-case UUID, as Apple does")
    func assignedID() async throws {
        try await withMock { base, _ in
            try await withSender(try makeSender(base)) { sender in
                let id = try #require(await sender.send(push()).apnsID)
                #expect(APNsValidator.isValidAPNsID(id))
                #expect(id == id.uppercased())
            }
        }
    }

    @Test("a token signed with another key is 403 InvalidProviderToken and not retried")
    func wrongKey() async throws {
        try await withMock { base, state in
            try await withSender(try makeSender(base, key: P256.Signing.PrivateKey())) { sender in
                let result = await sender.send(push())
                #expect(result.status == 403)
                #expect(result.reason == .invalidProviderToken)
                #expect(result.attempts == 1)
                #expect(state.receivedCount == 1)
            }
        }
    }

    @Test("a provider token the mock already accepted expires after an hour; the sender re-signs once, then reports it")
    func expiredProviderToken() async throws {
        let clock = ManualClock()
        try await withMock(clock: clock) { base, state in
            try await withSender(try makeSender(base)) { sender in
                #expect(await sender.send(push()).status == 200)
                clock.advance(3601)
                let result = await sender.send(push())
                #expect(result.status == 403)
                #expect(result.reason == .expiredProviderToken)
                #expect(state.receivedPushes.map(\.status) == [200, 403, 403])
            }
        }
    }

    @Test("a token with another kid is 403 UnrelatedKeyIdInToken")
    func wrongKeyID() async throws {
        try await withMock { base, _ in
            try await withSender(try makeSender(base, keyID: "OTHERKEY00")) { sender in
                #expect(await sender.send(push()).reason == .unrelatedKeyIdInToken)
            }
        }
    }

    @Test("size boundaries: 4096 and voip 5120 pass, one byte more is 413 PayloadTooLarge, never retried")
    func sizes() async throws {
        try await withMock { base, _ in
            try await withSender(try makeSender(base)) { sender in
                #expect(await sender.send(push(payload: sizedPayload(4096))).status == 200)
                let over = await sender.send(push(payload: sizedPayload(4097)))
                #expect(over.status == 413)
                #expect(over.reason == .payloadTooLarge)
                #expect(over.attempts == 1)
                #expect(
                    await sender.send(
                        push(topic: "com.example.app.voip", pushType: .voip, payload: sizedPayload(5120))
                    ).status == 200)
                #expect(
                    await sender.send(
                        push(topic: "com.example.app.voip", pushType: .voip, payload: sizedPayload(5121))
                    ).reason == .payloadTooLarge)
                // Past the largest limit the mock stops reading and still answers 413.
                #expect(await sender.send(push(payload: sizedPayload(20_000))).reason == .payloadTooLarge)
            }
        }
    }

    @Test("header boundaries answered like Apple")
    func headers() async throws {
        try await withMock { base, _ in
            try await withSender(try makeSender(base)) { sender in
                #expect(await sender.send(push(collapseID: String(repeating: "c", count: 64))).status == 200)
                #expect(await sender.send(push(collapseID: String(repeating: "c", count: 65))).reason == .badCollapseId)
                #expect(await sender.send(push(pushType: .background, priority: .immediately)).reason == .badPriority)
                #expect(await sender.send(push(pushType: .background, priority: .considerate)).status == 200)
                #expect(await sender.send(push(topic: "")).reason == .missingTopic)
                #expect(await sender.send(push(apnsID: "1234")).reason == .badMessageId)
                let bad = await sender.send(push(token: String(token64.dropLast())))
                #expect(bad.status == 400)
                #expect(bad.reason == .badDeviceToken)
                #expect(bad.attempts == 1)
                #expect(bad.hint?.contains("sandbox") == true)
                // A header value the peer would refuse, or that would make it close the shared connection, is
                // answered here and never written: no attempt, and the one connection stays.
                for request in [
                    push(topic: String(repeating: "t", count: 100_000)), push(topic: "com.example\napp"),
                    push(collapseID: "a\r\nx-evil: 1"), push(collapseID: String(repeating: "c", count: 1 << 20)),
                ] {
                    let refused = await sender.send(request)
                    #expect(refused.status == 400)
                    #expect(refused.attempts == 0)
                    #expect(refused.transportError?.hasPrefix("not sent: ") == true)
                }
                #expect(await sender.send(push()).status == 200)
                #expect(await sender.statistics().connectionsOpened == 1)
            }
        }
    }

    @Test("scripted 410 Unregistered carries its timestamp and is not retried")
    func unregistered() async throws {
        try await withMock { base, state in
            state.script(FailureScript(status: 410, reason: "Unregistered", timestamp: 1_700_000_000_123), for: token64)
            try await withSender(try makeSender(base)) { sender in
                let result = await sender.send(push())
                #expect(result.status == 410)
                #expect(result.reason == .unregistered)
                #expect(result.timestamp == 1_700_000_000_123)
                #expect(result.attempts == 1)
            }
        }
    }

    @Test("429 twice then success: three attempts")
    func tooManyThenOK() async throws {
        try await withMock { base, state in
            state.script(FailureScript(status: 429, reason: "TooManyRequests", times: 2), for: token64)
            try await withSender(try makeSender(base)) { sender in
                let result = await sender.send(push())
                #expect(result.status == 200)
                #expect(result.attempts == 3)
                #expect(state.receivedPushes.map(\.status) == [429, 429, 200])
            }
        }
    }

    @Test("500 and 503 every time: retried up to the attempt limit, then reported")
    func serverErrors() async throws {
        for status in [500, 503] {
            try await withMock { base, state in
                state.script(FailureScript(status: status), for: token64)
                try await withSender(try makeSender(base)) { sender in
                    let result = await sender.send(push())
                    #expect(result.status == status)
                    #expect(result.attempts == 3)
                    #expect(state.receivedCount == 3)
                }
            }
        }
    }

    @Test("a scripted BadDeviceToken is never retried")
    func scriptedBadToken() async throws {
        try await withMock { base, state in
            state.script(FailureScript(status: 400, reason: "BadDeviceToken"), for: token64)
            try await withSender(try makeSender(base)) { sender in
                let result = await sender.send(push())
                #expect(result.reason == .badDeviceToken)
                #expect(result.attempts == 1)
            }
        }
    }

    @Test("a scripted delay holds the answer back")
    func delay() async throws {
        try await withMock { base, state in
            state.script(FailureScript(status: 200, times: 1, delayMilliseconds: 300), for: token64)
            try await withSender(try makeSender(base)) { sender in
                let started = ContinuousClock.now
                #expect(await sender.send(push()).status == 200)
                #expect(ContinuousClock.now - started >= .milliseconds(300))
            }
        }
    }

    @Test("many tokens over several connections with bounded concurrency: results in input order")
    func many() async throws {
        try await withMock { base, state in
            let tokens = (0..<300).map { String(format: "%064x", $0) }
            state.script(FailureScript(status: 410), for: tokens[7])
            try await withSender(try makeSender(base, connections: 3)) { sender in
                let progress = ProgressCounter()
                let results = await sender.send(tokens.map { push(token: $0) }, concurrency: 32) { progress.set($0) }
                #expect(results.map(\.deviceToken) == tokens)
                #expect(results.filter(\.succeeded).count == 299)
                #expect(results[7].status == 410)
                #expect(progress.value == 300)
                #expect(state.receivedCount == 300)
            }
        }
    }

    @Test("an untrusted server certificate fails fast with a hint, not at a long timeout")
    func untrusted() async throws {
        try await withMock { base, _ in
            let sender = try APNsSender(
                configuration: APNsSenderConfiguration(
                    environment: .custom(base),
                    credentials: .token(APNsTokenManager(keyID: "KEYID12345", teamID: "TEAMID6789", key: signingKey)),
                    connectTimeout: .seconds(2), retry: RetryPolicy(maxAttempts: 1)))
            try await withSender(sender) { sender in
                let started = ContinuousClock.now
                let results = await sender.send([push(), push()], concurrency: 2)
                #expect(results.allSatisfy { $0.status == nil })
                // Says what is wrong and what to do, and is not retried.
                #expect(results[0].transportError?.contains("is not trusted") == true)
                #expect(results[0].transportError?.contains("--ca") == true)
                // BoringSSL's reason, without its numeric codes or the build's source paths.
                #expect(results[0].transportError?.contains("CERTIFICATE_VERIFY_FAILED") == true)
                #expect(results[0].transportError?.contains(".build") == false, "\(results[0].transportError ?? "")")
                #expect(results[0].transportError?.contains(".cc:") == false)
                #expect(results.allSatisfy { $0.attempts <= 1 })
                #expect(await sender.statistics().connectionsOpened == 1)
                #expect(ContinuousClock.now - started < .seconds(10))
            }
        }
    }
}

@Suite("Sender connection failures")
struct ConnectFailureTests {
    @Test("a refused connection names the host and port, fails at once, and is not retried")
    func refused() async throws {
        // A port that was free a moment ago: nothing listens there.
        let port = try await freePort()
        let sender = try makeSender("https://127.0.0.1:\(port)")
        try await withSender(sender) { sender in
            let started = ContinuousClock.now
            let result = await sender.send(push())
            #expect(result.status == nil)
            #expect(result.transportError?.contains("127.0.0.1:\(port)") == true)
            #expect(result.transportError?.contains("connection refused") == true)
            // The hint names the sender's own flag for the host, not flags it does not have.
            #expect(result.transportError?.contains("--host") == true, "\(result.transportError ?? "")")
            #expect(result.transportError?.contains("--url") == false)
            #expect(result.transportError?.contains("--environment") == false)
            #expect(await sender.statistics().connectionsOpened == 1)
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }
}

@Suite("Sender against the mock APNs (certificate auth)")
struct CertificateAuthTests {
    @Test("a client certificate signed by the configured CA is accepted without a token")
    func clientCertificate() async throws {
        try await withMock(clientCA: true) { base, state in
            let chain = try NIOSSLCertificateLoader.chain(pem: authority.clientCertificatePEM)
            let key = try NIOSSLCertificateLoader.key(pem: authority.clientKeyPEM)
            try await withSender(try makeSender(base, credentials: .certificate(chain: chain, key: key))) { sender in
                #expect(await sender.send(push()).status == 200)
                #expect(state.receivedCount == 1)
            }
        }
    }

    @Test("the client certificate's app is checked against apns-topic, as APNs does (TopicDisallowed)")
    func certificateTopic() async throws {
        try await withMock(clientCA: true) { base, state in
            let chain = try NIOSSLCertificateLoader.chain(pem: authority.clientCertificatePEM)
            let key = try NIOSSLCertificateLoader.key(pem: authority.clientKeyPEM)
            try await withSender(try makeSender(base, credentials: .certificate(chain: chain, key: key))) { sender in
                // The throwaway client certificate is "Apple Push Services: com.example.app".
                #expect(await sender.send(push(topic: "com.example.app")).status == 200)
                #expect(await sender.send(push(topic: "com.example.app.voip", pushType: .voip)).status == 200)
                let other = await sender.send(push(topic: "com.example.other"))
                #expect(other.status == 400)
                #expect(other.reason == .topicDisallowed)
                #expect(state.receivedCount == 3)
            }
        }
    }

    @Test("without a client certificate the TLS handshake fails")
    func noClientCertificate() async throws {
        try await withMock(clientCA: true) { base, state in
            try await withSender(try makeSender(base)) { sender in
                let result = await sender.send(push())
                #expect(result.status == nil)
                #expect(result.transportError?.contains("requires a client certificate") == true)
                #expect(result.transportError?.contains("--cert") == true)
                // Not retried: the same handshake would fail the same way.
                #expect(await sender.statistics().connectionsOpened == 1)
                #expect(state.receivedCount == 0)
            }
        }
    }
}

final class ProgressCounter: Sendable {
    private let storage = Synchronization.Mutex(0)
    func set(_ value: Int) { storage.withLock { $0 = max($0, value) } }
    var value: Int { storage.withLock { $0 } }
}

@Suite("PKCS#12 client credentials")
struct PKCS12Tests {
    /// Makes a .p12 from the throwaway client certificate with the system's openssl, as Keychain Access would export it.
    func makeP12(password: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("p12-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(authority.clientCertificatePEM.utf8).write(to: directory.appendingPathComponent("client.pem"))
        try Data(authority.clientKeyPEM.utf8).write(to: directory.appendingPathComponent("client-key.pem"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "openssl", "pkcs12", "-export", "-in", "client.pem", "-inkey", "client-key.pem",
            "-out", "client.p12", "-passout", "pass:\(password)",
        ]
        process.currentDirectoryURL = directory
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl pkcs12 -export failed")
        return directory.appendingPathComponent("client.p12")
    }

    @Test("a .p12 with its password authenticates against the mock; a wrong password is refused")
    func p12() async throws {
        let file = try makeP12(password: "s3cret")
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        #expect(throws: (any Error).self) { try NIOSSLCertificateLoader.pkcs12(path: file.path, passphrase: "wrong") }
        let bundle = try NIOSSLCertificateLoader.pkcs12(path: file.path, passphrase: "s3cret")
        try await withMock(clientCA: true) { base, state in
            try await withSender(try makeSender(base, credentials: .certificate(chain: bundle.chain, key: bundle.key)))
            { sender in
                #expect(await sender.send(push()).status == 200)
                #expect(state.receivedCount == 1)
            }
        }
    }
}
