import Essentials
import Foundation
import LocationCore

// location-vectors: replays the ZOI vector files and compares every zone, bit for bit, with what they expect.
//
//   location-vectors [--record] [FOLDER]        (FOLDER defaults to Tests/Fixtures/location/vectors)
//
// Each NAME.visits.json in FOLDER (the body of POST /v1/devices/{id}/visits) is sent visit by visit through
// VisitIntake with the default settings, as one fresh device. After each visit the zones' JSON (the document of
// GET /v1/devices/{id}/zois) is digested, and the digests must equal NAME.trajectory.txt line for line; the last
// document must equal NAME.zois.json byte for byte, one zone a line. Doubles are written shortest-round-trip, so equal
// bytes are equal bits. --record writes the two expected files instead (from a debug build: see docs/TESTING.md).
//
// scripts/check-release-vectors.sh builds this with `-c release` and runs it in CI, because the SDK's bits are what a
// debug build computes and an optimised build must compute the same (LocationCore/ZOI/LibcPow.swift).

/// One vector file's replay: the digest line after every visit and the final document, one zone a line.
struct Replay {
    var trajectory: [String] = []
    var zoneLines: [String] = []
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("location-vectors: \(message)\n".utf8))
    exit(2)
}

/// FNV-1a, 64 bits: enough to tell two zone documents apart.
func digest(_ bytes: [UInt8]) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01b3
    }
    let hex = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
}

func replay(_ url: URL) -> Replay {
    guard let data = FileManager.default.contents(atPath: url.path) else { fail("cannot read \(url.path)") }
    let items: [Result<VisitIntake.Item, VisitIntake.Rejection>]
    do { items = try VisitIntake.parse(try JSONValue.decode(data)) } catch {
        fail("\(url.lastPathComponent): \(error)")
    }
    let intake = VisitIntake(settings: LocationSettings())
    var state = DeviceVisits()
    var result = Replay()
    for (index, item) in items.enumerated() {
        let (change, outcome) = intake.run([item], deviceId: "vectors", state: state, now: 0)
        if let refused = outcome.rejected.first {
            fail("\(url.lastPathComponent): visits[\(index)] refused: \(refused.message)")
        }
        state.visits += change.newVisits
        state.zois = change.zois
        let document = ZOIList(state.zois).jsonBytes
        result.trajectory.append("\(index) \(change.newVisits[0].id) \(state.zois.count) \(digest(document))")
    }
    result.zoneLines = state.zois.map { String(decoding: $0.jsonBytes, as: UTF8.self) }
    return result
}

/// The fields of two zones' JSON that differ, with both values and their bits.
func differences(_ expected: String, _ actual: String) -> [String] {
    guard case .object(let e)? = try? JSONValue.decode(Data(expected.utf8)),
        case .object(let a)? = try? JSONValue.decode(Data(actual.utf8))
    else { return ["not JSON objects"] }
    func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .double(let d)?: d
        case .int(let i)?: Double(i)
        default: nil
        }
    }
    func describe(_ d: Double) -> String { "\(d) (0x\(String(d.bitPattern, radix: 16)))" }
    var lines: [String] = []
    for key in Set(e.keys).union(a.keys).sorted() where e[key] != a[key] {
        switch (e[key], a[key]) {
        case (.array(let x)?, .array(let y)?) where x.count == y.count:
            for (i, (u, v)) in zip(x, y).enumerated() where u != v {
                if let u = number(u), let v = number(v) {
                    lines.append(
                        "\(key)[\(i)]: expected \(describe(u)), got \(describe(v)), relative \(abs(v - u) / abs(u))")
                } else {
                    lines.append("\(key)[\(i)]: expected \(u), got \(v)")
                }
            }
        default:
            if let u = number(e[key]), let v = number(a[key]) {
                lines.append("\(key): expected \(describe(u)), got \(describe(v)), relative \(abs(v - u) / abs(u))")
            } else {
                lines.append(
                    "\(key): expected \(e[key].map { "\($0)" } ?? "nothing"), got \(a[key].map { "\($0)" } ?? "nothing")"
                )
            }
        }
    }
    return lines
}

func lines(_ url: URL) -> [String]? {
    guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

var arguments = Array(CommandLine.arguments.dropFirst())
let record = arguments.contains("--record")
arguments.removeAll { $0 == "--record" }
if let unknown = arguments.first(where: { $0.hasPrefix("-") }) { fail("unknown option \(unknown)") }
let folder = URL(fileURLWithPath: arguments.first ?? "Tests/Fixtures/location/vectors")
let names: [String]
do {
    names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".visits.json") }
        .map { String($0.dropLast(".visits.json".count)) }.sorted()
} catch { fail("cannot list \(folder.path): \(error)") }
if names.isEmpty { fail("no *.visits.json in \(folder.path)") }

var passed = 0
var failed = 0
for name in names {
    let result = replay(folder.appendingPathComponent("\(name).visits.json"))
    let trajectoryURL = folder.appendingPathComponent("\(name).trajectory.txt")
    let zoisURL = folder.appendingPathComponent("\(name).zois.json")
    if record {
        let document = "{\"zois\":[\n" + result.zoneLines.joined(separator: ",\n") + "\n]}\n"
        do {
            try Data((result.trajectory.joined(separator: "\n") + "\n").utf8).write(to: trajectoryURL)
            try Data(document.utf8).write(to: zoisURL)
        } catch { fail("cannot write the expected files of \(name): \(error)") }
        print("recorded \(name): \(result.trajectory.count) visits, \(result.zoneLines.count) zones")
        continue
    }
    guard let trajectory = lines(trajectoryURL), let zoisFile = lines(zoisURL) else {
        fail("\(name): missing \(name).trajectory.txt or \(name).zois.json (make them with --record)")
    }
    // The file is `{"zois":[`, one zone a line (each but the last followed by a comma), then `]}`.
    let expectedZones = zoisFile.dropFirst().dropLast().map { $0.hasSuffix(",") ? String($0.dropLast()) : $0 }
    var problems: [String] = []
    if let first = zip(trajectory, result.trajectory).enumerated().first(where: { $0.element.0 != $0.element.1 }) {
        problems.append(
            "the zones differ from visit \(first.offset) on: expected \(first.element.0), got \(first.element.1)")
    } else if trajectory.count != result.trajectory.count {
        problems.append("expected \(trajectory.count) visits, replayed \(result.trajectory.count)")
    }
    if expectedZones.count != result.zoneLines.count {
        problems.append("expected \(expectedZones.count) zones at the end, got \(result.zoneLines.count)")
    }
    for (expected, actual) in zip(expectedZones, result.zoneLines) where expected != actual {
        let id = (try? JSONValue.decode(Data(expected.utf8)))?["id"]?.stringValue ?? "?"
        problems += differences(expected, actual).map { "zone \(id): \($0)" }
    }
    if problems.isEmpty {
        passed += 1
        print("PASS \(name): \(result.trajectory.count) visits, \(result.zoneLines.count) zones, bit for bit")
    } else {
        failed += 1
        print("FAIL \(name):")
        for problem in problems { print("  \(problem)") }
    }
}
if !record {
    print("\(passed) passed, \(failed) failed")
    exit(failed == 0 ? 0 : 1)
}
