public import EnrichmentCore

/// Finds visits in a device's fixes (docs/LOCATION-RULES.md §1.3, ours): anchor-based stay points.
///
/// OpenLocate's `location_context` markers take part: a `visit_entry` fix ends any stay before it and anchors a
/// new one; a `visit_exit` fix closes the stay it belongs to (so it is emitted without waiting for the next
/// fix), and a stay opened by `visit_entry` and closed by `visit_exit` is emitted even when shorter than the
/// minimum duration: the device said it was a visit.
public struct VisitDetector: Sendable {
    /// The detector's settings.
    public struct Parameters: Sendable, Equatable {
        /// A fix stays in the stay while within this many metres (haversine) of the anchor fix.
        public var radius = 100.0
        /// Shortest first-to-last span of an emitted stay, seconds.
        public var minimumDuration = 600.0
        /// Fixes less accurate than this (metres) are ignored; fixes without accuracy are used.
        public var maximumFixAccuracy = 50.0
        /// A gap longer than this between consecutive fixes ends the stay, seconds.
        public var maximumGap = 21_600.0

        public init() {}
    }

    public var parameters: Parameters

    public init(parameters: Parameters) { self.parameters = parameters }

    /// The visits closed in `fixes` (any order; sorted by fix time here), as intake items with their ids.
    public func detect(_ fixes: [LocationFix], deviceId: String) -> [VisitIntake.Item] {
        scan(fixes, deviceId: deviceId).visits
    }

    /// The visits closed in `fixes`, and the time after which the next scan must start: fixes at or before it
    /// can no longer belong to a new visit (nil when `fixes` is empty).
    public func scan(_ fixes: [LocationFix], deviceId: String) -> (visits: [VisitIntake.Item], resumeAfter: Double?) {
        var usable = fixes.enumerated().filter { _, fix in
            fix.horizontalAccuracy.map { $0 <= parameters.maximumFixAccuracy } ?? true
        }
        usable.sort { a, b in
            a.element.fixTime != b.element.fixTime ? a.element.fixTime < b.element.fixTime : a.offset < b.offset
        }
        var stream: [LocationFix] = []
        for (_, fix) in usable where stream.last?.fixTime != fix.fixTime { stream.append(fix) }
        var items: [VisitIntake.Item] = []
        var resumeAfter = stream.last?.fixTime
        var i = 0
        while i < stream.count {
            let anchor = stream[i]
            let marked = anchor.context == "visit_entry"
            var j = i + 1
            var closedByExit = false
            while j < stream.count {
                let fix = stream[j]
                if fix.context == "visit_entry" { break }
                guard anchor.coordinate.distance(to: fix.coordinate) <= parameters.radius,
                    fix.fixTime - stream[j - 1].fixTime <= parameters.maximumGap
                else { break }
                j += 1
                if fix.context == "visit_exit" {
                    closedByExit = true
                    break
                }
            }
            // The stay is stream[i..<j]. Open (reached the end, not closed by a marker): not emitted yet, and the
            // next scan starts at its first fix.
            if j == stream.count && !closedByExit {
                resumeAfter = anchor.fixTime.nextDown
                break
            }
            let stay = stream[i..<j]
            let span = stay.last!.fixTime - stay.first!.fixTime
            if span >= parameters.minimumDuration || (marked && closedByExit && stay.count > 1) {
                items.append(Self.visit(of: Array(stay), deviceId: deviceId))
                i = j
            } else {
                i += 1
            }
        }
        return (items, resumeAfter)
    }

    /// The visit of a stay: mean position, accuracy from the spread and the fixes' own accuracy.
    static func visit(of stay: [LocationFix], deviceId: String) -> VisitIntake.Item {
        var latitude = 0.0
        var longitude = 0.0
        for fix in stay {
            latitude += fix.coordinate.latitude
            longitude += fix.coordinate.longitude
        }
        latitude /= Double(stay.count)
        longitude /= Double(stay.count)
        let centre = Coordinate(latitude: latitude, longitude: longitude)
        var squares = 0.0
        var accuracySum = 0.0
        var accuracyCount = 0
        for fix in stay {
            let d = fix.coordinate.distance(to: centre)
            squares += d * d
            if let a = fix.horizontalAccuracy {
                accuracySum += a
                accuracyCount += 1
            }
        }
        let rms = (squares / Double(stay.count)).squareRoot()
        let meanAccuracy = accuracyCount > 0 ? accuracySum / Double(accuracyCount) : 0
        let arrival = stay.first!.fixTime
        return VisitIntake.Item(
            id: "fixes-\(AppNamespace.id(of: deviceId))-\(Int(arrival.rounded(.towardZero)))", arrival: arrival,
            departure: stay.last!.fixTime, latitude: latitude, longitude: longitude,
            horizontalAccuracy: max(rms, meanAccuracy, 1), source: "detected")
    }
}
