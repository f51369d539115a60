import Foundation

/// Reads visit files for replays: the SDK sample importer's CSV (docs/LOCATION-RULES.md §1.1 step 6) and the JSON
/// body of `POST /v1/devices/{id}/visits`.
public enum VisitFile {
    /// A problem with a visit file, with the line it is on.
    public struct Problem: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// The rows the SDK sample importer keeps (accuracy strictly below 20 m), in file order, `date` = departure.
    public static func sampleCSV(_ text: String, deviceId: String) throws(Problem) -> [Visit] {
        var visits: [Visit] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let head = line.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            if head.isEmpty { continue }
            let columns = line.split(separator: ",", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            guard columns.count >= 5 else {
                throw Problem(description: "line \(number + 1): expected id,accuracy,POINT(lng lat),arrival,departure")
            }
            guard let accuracy = Double(columns[1]) else {
                throw Problem(description: "line \(number + 1): accuracy '\(columns[1])' is not a number")
            }
            guard accuracy < 20.0 else { continue }
            guard let point = parsePoint(columns[2]) else {
                throw Problem(description: "line \(number + 1): '\(columns[2])' is not POINT(lng lat)")
            }
            guard let arrival = parseDate(columns[3]), let departure = parseDate(columns[4]) else {
                throw Problem(
                    description: "line \(number + 1): dates must look like 2018-12-19 10:30:35+00")
            }
            visits.append(
                Visit(
                    id: columns[0], deviceId: deviceId, arrival: arrival, departure: departure, latitude: point.lat,
                    longitude: point.lng, horizontalAccuracy: accuracy, recordedAt: departure, source: "sample"))
        }
        return visits
    }

    static func parsePoint(_ text: String) -> (lng: Double, lat: Double)? {
        guard text.hasPrefix("POINT("), text.hasSuffix(")") else { return nil }
        let inner = text.dropFirst(6).dropLast().split(separator: " ")
        guard inner.count == 2, let lng = Double(inner[0]), let lat = Double(inner[1]) else { return nil }
        return (lng, lat)
    }

    /// `yyyy-MM-dd HH:mm:ss±HH[MM]` to epoch seconds.
    public static func parseDate(_ text: String) -> Double? {
        let chars = Array(text.utf8)
        guard chars.count >= 22 else { return nil }
        func int(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= chars.count else { return nil }
            return Int(String(decoding: chars[range], as: UTF8.self))
        }
        guard let y = int(0..<4), let mo = int(5..<7), let d = int(8..<10), let h = int(11..<13),
            let mi = int(14..<16), let s = int(17..<19),
            chars[19] == UInt8(ascii: "+") || chars[19] == UInt8(ascii: "-"),
            let oh = int(20..<22)
        else { return nil }
        let om = chars.count >= 24 ? (int(22..<24) ?? 0) : 0
        let sign = chars[19] == UInt8(ascii: "-") ? -1 : 1
        let days = ZOIQualifier.daysFromCivil(year: y, month: mo, day: d)
        let local = days * 86_400 + h * 3600 + mi * 60 + s
        return Double(local - sign * (oh * 3600 + om * 60))
    }
}
