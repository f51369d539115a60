/// One zone of interest as stored between visits (docs/LOCATION-RULES.md §2.2, §2.10): a Gaussian component of the
/// device's mixture plus its time features.
public struct ZoneOfInterest: Sendable, Equatable {
    /// Stable id assigned at creation (the SDK makes a new UUID on every save; the server keeps one).
    public var id: String
    /// Mean x in metres (the SDK stores it as `latMean`).
    public var meanX: Double
    /// Mean y in metres (the SDK stores it as `lngMean`).
    public var meanY: Double
    /// Inverse covariance, row-major [x00, x01, x10, x11]; may be slightly asymmetric, all four are kept.
    public var inverse: [Double]
    /// Covariance determinant, carried along by the update (never recomputed from `inverse`).
    public var det: Double
    public var prior: Double
    public var accumulator: Double
    public var age: Double
    /// Visit ids in assignment order.
    public var visitIds: [String]
    public var startTime: Double
    public var endTime: Double
    /// Whole seconds.
    public var duration: Int
    /// 168 hourly bins, Monday 00h UTC first.
    public var weeklyDensity: [Double]
    /// `HOME_PERIOD`, `WORK_PERIOD`, `OTHER` or `NO QUALIFIER`.
    public var period: String?
    public var wktPolygon: String

    public init(
        id: String, meanX: Double, meanY: Double, inverse: [Double], det: Double, prior: Double, accumulator: Double,
        age: Double, visitIds: [String], startTime: Double, endTime: Double, duration: Int, weeklyDensity: [Double],
        period: String?, wktPolygon: String
    ) {
        self.id = id
        self.meanX = meanX
        self.meanY = meanY
        self.inverse = inverse
        self.det = det
        self.prior = prior
        self.accumulator = accumulator
        self.age = age
        self.visitIds = visitIds
        self.startTime = startTime
        self.endTime = endTime
        self.duration = duration
        self.weeklyDensity = weeklyDensity
        self.period = period
        self.wktPolygon = wktPolygon
    }

    /// The centre in degrees: `(y2lat(mean_y), x2lon(mean_x))`.
    public var latitude: Double { SphericalMercator.y2lat(meanY) }
    public var longitude: Double { SphericalMercator.x2lon(meanX) }

    /// True when every number is finite (what JSON and the stores can hold).
    public var isFinite: Bool {
        meanX.isFinite && meanY.isFinite && inverse.allSatisfy(\.isFinite) && det.isFinite && prior.isFinite
            && accumulator.isFinite && age.isFinite
    }

    /// The periods §3.7 acts on.
    public var isClassified: Bool { period == ZOIPeriod.home || period == ZOIPeriod.work }
}

/// The SDK's period labels.
public enum ZOIPeriod {
    public static let home = "HOME_PERIOD"
    public static let work = "WORK_PERIOD"
    public static let other = "OTHER"
    public static let unqualified = "NO QUALIFIER"
}
