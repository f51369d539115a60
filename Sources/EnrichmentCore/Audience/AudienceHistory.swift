/// Where a device's zones of interest and visits are found for audiences (`zoi`, `visited`): the location store,
/// which keeps zones on the grid of `LastFixCells` and visits on the finer one of `VisitCells`.
public protocol AudienceHistory: Sendable {
    /// Every ZOI whose centre's cell lies in one of `ranges`, in every app.
    func zoneCentres(inCells ranges: [ClosedRange<Int64>]) async throws -> [ZoneCentre]
    /// Every visit whose cell (`VisitCells`) lies in one of `ranges` and that overlaps `from...to` (epoch seconds: it departed at
    /// or after `from` and arrived at or before `to`), in every app.
    func visitPlaces(inCells ranges: [ClosedRange<Int64>], from: Double, to: Double) async throws -> [VisitPlace]
    /// Every device whose region state says it is inside the region (`storedId`), by the region's own rule as the
    /// fixes were evaluated (its circle with the fix's accuracy, or the Wi-Fi network the fix reported).
    func devicesInside(region storedId: String) async throws -> [String]
}

/// A device's zone of interest, as audiences read it: its centre and its period (`HOME_PERIOD`, `WORK_PERIOD`,
/// `OTHER`, `NO QUALIFIER` or none).
public struct ZoneCentre: Sendable, Equatable {
    public var deviceId: String
    public var period: String?
    public var coordinate: Coordinate

    public init(deviceId: String, period: String?, coordinate: Coordinate) {
        self.deviceId = deviceId
        self.period = period
        self.coordinate = coordinate
    }
}

/// A device's visit, as audiences read it: where and when.
public struct VisitPlace: Sendable, Equatable {
    public var deviceId: String
    public var coordinate: Coordinate
    public var arrival: Double
    public var departure: Double

    public init(deviceId: String, coordinate: Coordinate, arrival: Double, departure: Double) {
        self.deviceId = deviceId
        self.coordinate = coordinate
        self.arrival = arrival
        self.departure = departure
    }
}

/// An area an audience names: a circle, or a polygon whose edges are straight lines in latitude and longitude.
public enum AudienceArea: Sendable, Equatable {
    case circle(center: Coordinate, radius: Double)
    /// At least 3 vertices, in order (the last joins the first); may not cross the antimeridian.
    case polygon([Coordinate])

    /// Whether `point` lies in the area (a circle's edge is in; a polygon by the even-odd rule, `GeoPolygon`).
    public func contains(_ point: Coordinate) -> Bool {
        switch self {
        case .circle(let center, let radius):
            return center.distance(to: point) <= radius
        case .polygon(let vertices):
            return GeoPolygon.evenOdd(vertices, contains: point)
        }
    }

    /// The cells (`LastFixCells`) that may hold a point of the area.
    public var cellRanges: [ClosedRange<Int64>] {
        switch self {
        case .circle(let center, let radius):
            return LastFixCells.ranges(center: center, radius: radius)
        case .polygon(let vertices):
            let latitudes = vertices.map(\.latitude)
            let longitudes = vertices.map(\.longitude)
            return LastFixCells.ranges(
                south: latitudes.min() ?? 0, north: latitudes.max() ?? 0, west: longitudes.min() ?? 0,
                east: longitudes.max() ?? 0)
        }
    }
}
