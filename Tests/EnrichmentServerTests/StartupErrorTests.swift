import Foundation
import MockAPNs
import TestSupport
import Testing

/// The first errors an operator meets, from the real executable: each names the setting and what to do.
@Suite("Start-up errors that say what to do", .serialized)
struct StartupErrorTests {
    @Test(
        "PostgreSQL absent at start: ENRICH_DATABASE_WAIT tries again with a warning each time, then exits with the reason"
    )
    func databaseAbsent() throws {
        let port = try LoopbackPort.free()
        let url = "postgres://enrich:pw@127.0.0.1:\(port)/enrich?sslmode=disable"
        let started = Date()
        let (status, output) = try failedStart(
            ["--log-level", "warning"], environment: ["ENRICH_DATABASE_URL": url, "ENRICH_DATABASE_WAIT": "3"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(status == 1, "\(output)")
        #expect(output.contains("PostgreSQL is not reachable yet; trying again"), "\(output)")
        #expect(output.components(separatedBy: "not reachable yet").count - 1 >= 2)
        #expect(output.contains("cannot use postgres://enrich:***@127.0.0.1:\(port)/enrich"), "\(output)")
        #expect(!output.contains(":pw@"), "the password is never shown")
        #expect(elapsed >= 2 && elapsed < 15, "gave up after \(elapsed) s")
        // 0: no waiting, as before.
        let quick = Date()
        let (again, _) = try failedStart(
            ["--log-level", "warning"], environment: ["ENRICH_DATABASE_URL": url, "ENRICH_DATABASE_WAIT": "0"])
        #expect(again == 1)
        #expect(Date().timeIntervalSince(quick) < 2)
    }

    @Test("PostgreSQL that comes up during ENRICH_DATABASE_WAIT: the service starts and answers")
    func databaseArrivesLate() async throws {
        let database = try await ForwardedPostgres()
        defer { database.cut() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("late-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // The database "arrives" 2 s after the service starts.
        let starter = Task {
            try await Task.sleep(for: .seconds(2))
            try database.start()
        }
        defer { starter.cancel() }
        let log = directory.appendingPathComponent("server.log")
        let server = try ServerProcess.start(
            database: directory.appendingPathComponent("unused.sqlite").path,
            environment: ["ENRICH_DATABASE_URL": database.url, "ENRICH_DATABASE_WAIT": "30"], logFile: log)
        defer { server.kill9() }
        let health = try await ServiceClient(base: "http://127.0.0.1:\(server.port)").get("/health")
        #expect(health.status == 200)
        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.contains("PostgreSQL is not reachable yet; trying again"), "\(text)")
    }

    @Test("a port already in use names the address and the settings that change it")
    func portInUse() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("port-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try ServerProcess.start(database: directory.appendingPathComponent("a.sqlite").path)
        defer { first.terminate() }
        let (status, output) = try failedStart(
            [
                "--port", String(first.port), "--log-level", "info", "--db",
                directory.appendingPathComponent("b.sqlite").path,
            ],
            environment: [:])
        #expect(status == 1, "\(output)")
        #expect(output.contains("cannot listen on 127.0.0.1:\(first.port): the address is already in use"), "\(output)")
        #expect(output.contains("--port or ENRICH_PORT"))
        #expect(!output.contains("bind(descriptor"), "the raw system call is not what a user needs: \(output)")
    }

    @Test("a .p8 token key given as the certificate's key is named as such, with the setting it belongs in")
    func tokenKeyAsCertificateKey() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("p8cert-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (keyFile, _) = try writeMockCredentials(into: directory)
        let certificate = directory.appendingPathComponent("client.pem").path
        try authority.clientCertificatePEM.write(toFile: certificate, atomically: true, encoding: .utf8)
        let (status, output) = try failedStart(
            ["--db", directory.appendingPathComponent("db.sqlite").path],
            environment: ["ENRICH_APNS_CERT": certificate, "ENRICH_APNS_CERT_KEY": keyFile])
        #expect(status != 0)
        #expect(output.contains("ENRICH_APNS_CERT_KEY"), "\(output)")
        #expect(output.contains(".p8"), "\(output)")
        #expect(output.contains("ENRICH_APNS_KEY_FILE"), "\(output)")
        #expect(!output.contains("ENRICH_APNS_SANDBOX_URL"), "the error is not about the sandbox URL: \(output)")
        // A key that belongs to another certificate is named as not this certificate's key.
        let otherKey = directory.appendingPathComponent("other-key.pem").path
        try LocalCertificateAuthority().clientKeyPEM.write(toFile: otherKey, atomically: true, encoding: .utf8)
        let (otherStatus, otherOutput) = try failedStart(
            ["--db", directory.appendingPathComponent("db.sqlite").path],
            environment: ["ENRICH_APNS_CERT": certificate, "ENRICH_APNS_CERT_KEY": otherKey])
        #expect(otherStatus != 0)
        #expect(otherOutput.contains("not the private key of the certificate"), "\(otherOutput)")
    }
}
