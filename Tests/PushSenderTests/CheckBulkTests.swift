import Essentials
import Foundation
import TestSupport
import Testing

@Suite("push-sender check in bulk: files, folders, JSON Lines, several moments, hints")
struct CheckBulkTests {
    static func folder(_ payloads: [String: String]) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, text) in payloads { try Data(text.utf8).write(to: directory.appendingPathComponent(name)) }
        return directory
    }

    static let t: Int64 = 1_700_000_000
    static func payload(_ timestamp: String) -> String {
        #"{"aps":{"alert":{"title":"T","body":"B"},"mutable-content":1,"timestamp":\#(timestamp)}}"#
    }

    @Test("many files and a folder: one row each and a summary; the highest status wins")
    func manyFiles() throws {
        let directory = try Self.folder([
            "a-fresh.json": Self.payload("\(Self.t)"), "b-old.json": Self.payload("\(Self.t - 301)"),
            "c-none.json": #"{"aps":{"alert":"x"}}"#, "notes.txt": "ignored",
        ])
        defer { try? FileManager.default.removeItem(at: directory) }
        let both = try runPushSender([
            "check", directory.appendingPathComponent("a-fresh.json").path,
            directory.appendingPathComponent("b-old.json").path, "--now", "\(Self.t)",
        ])
        #expect(both.status == 1, "\(both.err)")
        let lines = both.out.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].contains("a-fresh.json") && lines[0].contains("FRESH (within_window)"))
        #expect(lines[1].contains("b-old.json") && lines[1].contains("STALE (older_than_window)"))
        #expect(lines[2] == "2 payloads: 1 fresh, 1 stale, 0 no timestamp, 0 invalid")
        let all = try runPushSender(["check", directory.path, "--now", "\(Self.t)"])
        #expect(all.status == 2)
        #expect(all.out.contains("3 payloads: 1 fresh, 1 stale, 1 no timestamp, 0 invalid"))
        #expect(!all.out.contains("notes.txt"))
    }

    @Test("JSON Lines on stdin, --json out: one object per payload, invalid lines named")
    func jsonLines() throws {
        let input = [Self.payload("\(Self.t - 10)"), "", "{broken", Self.payload("\(Self.t + 5)")].joined(
            separator: "\n")
        let result = try runPushSender(["check", "--json", "--now", "\(Self.t)"], stdin: input)
        #expect(result.status == 3)
        let rows = try result.out.split(separator: "\n").map { try JSONValue.decode(Data($0.utf8)) }
        #expect(rows.count == 3)
        #expect(rows[0]["file"] == .string("stdin:1"))
        #expect(rows[0]["age_seconds"] == .int(10))
        #expect(rows[1]["file"] == .string("stdin:3"))
        #expect(rows[1]["state"] == .string("invalid"))
        #expect(rows[2]["rule"] == .string("future_accepted"))
        #expect(rows[2]["hints"].map { if case .array(let a) = $0 { a.count } else { 0 } } == 1)
    }

    @Test("--ages judges one payload at several moments: 300 fresh, 301 stale")
    func ages() throws {
        let result = try runPushSender(["check", "-", "--ages", "299,300,301"], stdin: Self.payload("\(Self.t)"))
        #expect(result.status == 1)
        let rows = result.out.split(separator: "\n")
        #expect(rows.count == 4)
        #expect(rows[0].hasPrefix("FRESH (within_window): timestamp \(Self.t) is 299 s old"))
        #expect(rows[1].hasPrefix("FRESH (within_window): timestamp \(Self.t) is 300 s old"))
        #expect(rows[2].hasPrefix("STALE (older_than_window): timestamp \(Self.t) is 301 s old"))
        #expect(rows[0].contains("at \(Self.t + 299)"))
        let at = try runPushSender(
            ["check", "-", "--at", "\(Self.t + 300),\(Self.t + 301)", "--json"], stdin: Self.payload("\(Self.t)"))
        #expect(at.out.split(separator: "\n").count == 2)
        #expect(try runPushSender(["check", "-", "--ages", "x"], stdin: Self.payload("1")).status == 64)
        #expect(try runPushSender(["check", "-", "--ages", "1", "--now", "5"], stdin: Self.payload("1")).status == 64)
    }

    @Test("a millisecond timestamp gets a hint; the verdict is unchanged")
    func milliseconds() throws {
        let result = try runPushSender(["check", "-", "--now", "\(Self.t)"], stdin: Self.payload("1700000000000"))
        #expect(result.status == 0)
        #expect(result.out.contains("FRESH (future_accepted)"))
        #expect(result.out.contains("hint: the timestamp 1700000000000 looks like milliseconds"))
        #expect(result.out.contains("(1700000000 here)"))
    }
}
