import Foundation

/// A WGS84 point in degrees.
public struct Coordinate: Sendable, Hashable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Mean Earth radius in metres (IUGG), used for every great-circle distance here.
    public static let earthRadius = 6_371_008.8

    /// Great-circle distance in metres (haversine).
    public func distance(to other: Coordinate) -> Double {
        let lat1 = Self.radians(latitude)
        let lat2 = Self.radians(other.latitude)
        return Self.haversine(
            lat1: lat1, cosLat1: cos(lat1), lng1: longitude,
            lat2: lat2, cosLat2: cos(lat2), lng2: other.longitude)
    }

    /// Degrees to radians, the one conversion every distance here uses.
    @inline(__always) static func radians(_ degrees: Double) -> Double { degrees * .pi / 180 }

    /// The haversine kernel, shared by `distance(to:)` and the spatial index so both give bit-identical metres.
    ///
    /// Latitudes in radians with their cosines precomputed; longitudes in degrees.
    @inline(__always)
    static func haversine(lat1: Double, cosLat1: Double, lng1: Double, lat2: Double, cosLat2: Double, lng2: Double)
        -> Double
    {
        let halfLat = sin((lat2 - lat1) / 2)
        let halfLng = sin(radians(lng2 - lng1) / 2)
        let a = halfLat * halfLat + cosLat1 * cosLat2 * halfLng * halfLng
        return 2 * earthRadius * asin(min(1, sqrt(a)))
    }

    /// True when latitude is in [-90, 90] and longitude in [-180, 180].
    public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && (-90...90).contains(latitude) && (-180...180).contains(longitude)
    }
}
