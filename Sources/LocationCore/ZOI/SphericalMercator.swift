import Foundation

/// The SDK's spherical Mercator projection (docs/LOCATION-RULES.md §2.1): visits become metres before the mixture
/// sees them.
///
/// Every formula keeps the SDK's evaluation order and calls the C library's functions, so the bits match the
/// reference port on Linux.
public enum SphericalMercator {
    /// The sphere's radius, metres (WGS84 semi-major axis).
    public static let radius = 6_378_137.0

    @inline(__always) static func rad(_ v: Double) -> Double { (v * Double.pi) / 180 }
    @inline(__always) static func deg(_ v: Double) -> Double { (v * 180) / Double.pi }

    /// Longitude (degrees) to x (metres).
    public static func lon2x(_ lon: Double) -> Double { rad(lon) * radius }
    /// Latitude (degrees) to y (metres).
    public static func lat2y(_ lat: Double) -> Double { log(tan(Double.pi / 4 + rad(lat) / 2)) * radius }
    /// x (metres) to longitude (degrees).
    public static func x2lon(_ x: Double) -> Double { deg(x / radius) }
    /// y (metres) to latitude (degrees).
    public static func y2lat(_ y: Double) -> Double { deg(atan(exp(y / radius)) * 2 - Double.pi / 2) }
}
