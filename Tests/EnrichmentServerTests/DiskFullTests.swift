import Essentials
import Foundation
import TestSupport
import Testing

/// The real service with its SQLite file on a small filesystem that fills up.
@Suite("A full disk is said as such, and recovered from", .serialized)
struct DiskFullTests {
    @Test("SQLite on a full disk: writes answer 507 storage_full, ready fails, live stays up; space back: it recovers")
    func diskFull() async throws {
        let mountPoint = FileManager.default.temporaryDirectory.appendingPathComponent("tinyfs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: mountPoint) }
        // A 4 MiB filesystem (tmpfs; mounting needs root, as CI runs).
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        mount.arguments = ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mountPoint.path]
        try mount.run()
        mount.waitUntilExit()
        try #require(
            mount.terminationStatus == 0, "cannot mount a small tmpfs: run the tests as root (scripts/test.sh)")
        defer {
            let unmount = Process()
            unmount.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            unmount.arguments = ["umount", "-l", mountPoint.path]
            try? unmount.run()
            unmount.waitUntilExit()
        }
        // Room to give back later.
        let filler = mountPoint.appendingPathComponent("filler")
        try Data(count: 1 << 20).write(to: filler)

        let server = try ServerProcess.start(database: mountPoint.appendingPathComponent("db.sqlite").path)
        defer { server.kill9() }
        let client = ServiceClient(base: "http://127.0.0.1:\(server.port)")
        #expect(try await client.get("/health/ready").status == 200)
        let now = Int64(Date().timeIntervalSince1970)
        let items = (0..<500).map { #"{"latitude":48.8,"longitude":2.3,"utc_timestamp":\#(now - 10_000 + Int64($0))}"# }
        var full: ServiceClient.Reply?
        for n in 0..<400 {
            let reply = try await client.post(
                "/v1/devices/fill-\(n)/locations", json: #"{"locations":[\#(items.joined(separator: ","))]}"#)
            if reply.status != 200 {
                full = reply
                break
            }
        }
        let refused = try #require(full, "the disk never filled")
        #expect(refused.status == 507, "\(refused.text)")
        #expect(refused.errorReason == "storage_full")
        #expect(refused.text.contains("free space"))
        let ready = try await client.get("/health/ready")
        #expect(ready.status == 503)
        #expect(ready.json?["reason"] == .string("storage_full"))
        #expect(try await client.get("/health/live").status == 200)

        try FileManager.default.removeItem(at: filler)
        let small = #"{"locations":[{"latitude":48.8,"longitude":2.3,"utc_timestamp":\#(now - 5)}]}"#
        let again = try await client.post("/v1/devices/after/locations", json: small)
        #expect(again.status == 200, "\(again.text)")
        #expect(try await client.get("/health/ready").status == 200)
        #expect(try await client.get("/v1/devices/after/location").status == 200)
    }
}
