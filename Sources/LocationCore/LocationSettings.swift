/// The location features' settings (docs/LOCATION-RULES.md §1.3, §4.4, §6 Configuration), with the sample app's
/// defaults.
public struct LocationSettings: Sendable, Equatable {
    /// Run the ZOI pipeline on accepted visits.
    public var zoiEnabled = true
    /// Label ZOIs home/work (§3).
    public var classificationEnabled = true
    /// Visits need `horizontal_accuracy` strictly below this (metres).
    public var visitAccuracyFilter = 50.0
    /// A visit closer than this (strictly) to a classified ZOI's centre records a ZOI event.
    public var classifiedZOIRadius = 100.0
    /// Days a visit, fix-derived record or event is kept.
    public var retentionDays = 30
    /// The visit detector's parameters (§1.3).
    public var detector = VisitDetector.Parameters()
    /// Evaluate regions as fixes arrive.
    public var regionsEnabled = true
    /// Replace a device's POI regions around its nearest POIs on each fix.
    public var poiRegionsEnabled = true
    /// How many nearest POIs get a region (`stores_by_page`, 1…5).
    public var poiRegionsCount = 1
    /// The POI regions' radius, metres.
    public var poiRegionRadius = 100.0
    /// Most custom regions evaluated per device and fix (the nearest ones; regions the device is in always are).
    public var customRegionsPerDevice = 7
    /// Allowed custom region radii, metres.
    public var customRadius: ClosedRange<Double> = 1...100_000
    /// Detect visits from fixes.
    public var detectVisits = true

    public init() {}
}
