import EnrichmentCore
import Foundation

/// The WKT ellipse of a ZOI at χ²(0.7) (docs/LOCATION-RULES.md §2.11, the SDK's `geometryFigmm`).
public enum ZOIPolygon {
    /// `χ²(p) = −2·log(1 − p)`.
    public static func chiSquared(_ p: Double) -> Double { -2 * log(1 - p) }

    /// The covariance from the inverse C, as LAPACK `dgetrf`+`dgetri` invert the transposed grid Surge hands over.
    static func covariance(_ c: [Double]) -> [Double] {
        // A = Cᵀ.
        var a11 = c[0]
        var a12 = c[2]
        var a21 = c[1]
        var a22 = c[3]
        let pivot = abs(a21) > abs(a11)
        if pivot {
            swap(&a11, &a21)
            swap(&a12, &a22)
        }
        let l = (1 / a11) * a21
        a22 = a22 + l * (-a12)
        let i11 = 1 / a11
        let i22 = 1 / a22
        let i12 = (a12 * i11) * (-i22)
        var b11 = i11 + (-l) * i12
        var b21 = l == 0 ? 0 : (-l) * i22
        var b12 = i12
        var b22 = i22
        if pivot {
            swap(&b11, &b12)
            swap(&b21, &b22)
        }
        // cov = Bᵀ, row-major.
        return [b11, b21, b12, b22]
    }

    /// The direction of the larger eigenvalue's eigenvector, with LAPACK `dgeev`'s sign (§2.11 step 2).
    static func axis(_ cov: [Double]) -> (Double, Double) {
        let a = cov[0]
        let b = cov[1]
        let c = cov[2]
        let d = cov[3]
        if b == 0 || c == 0 {
            if a > d { return (1, b / (a - d)) }
            if a < d { return (-b / (a - d), 1) }
            return (0, 1)
        }
        let pp = (a - d) / 2
        let r = sqrt(pp * pp + b * c)
        if pp > 0 { return (pp + r, c) }
        if pp < 0 { return (-c, pp - r) }
        return (r, c)
    }

    /// `x·C·xᵀ` for a row vector, in Surge's product order.
    @inline(__always) static func quadratic(_ x0: Double, _ x1: Double, _ c: [Double]) -> Double {
        let r0 = (0.0 + x0 * c[0]) + x1 * c[2]
        let r1 = (0.0 + x0 * c[1]) + x1 * c[3]
        return (0.0 + r0 * x0) + r1 * x1
    }

    /// `POLYGON((lon lat,…))` with 53 pairs, `%f` each.
    public static func wkt(meanX: Double, meanY: Double, inverse c: [Double]) -> String {
        let cov = covariance(c)
        let v = axis(cov)
        let n = sqrt(libcPow(v.0, 2) + libcPow(v.1, 2))
        let cosT = v.0 / n
        let sinT = v.1 / n
        let chi = chiSquared(0.7)
        let a = sqrt(chi / quadratic(cosT, sinT, c))
        let b = sqrt(chi / quadratic(-sinT, cosT, c))
        let step = 8.0
        let count = Int(2 * Double.pi * step) + 1
        var text: [UInt8] = Array("POLYGON((".utf8)
        text.reserveCapacity(53 * 24 + 12)
        var firstEnd = 0
        for i in 0...count {
            let t = Double(i) / step
            let x = (meanX + (a * cosT) * cos(t)) - (b * sinT) * sin(t)
            let y = (meanY + (a * sinT) * cos(t)) + (b * cosT) * sin(t)
            CFormat.appendFixed(SphericalMercator.x2lon(x), to: &text)
            text.append(UInt8(ascii: " "))
            CFormat.appendFixed(SphericalMercator.y2lat(y), to: &text)
            if i == 0 { firstEnd = text.count }
            text.append(UInt8(ascii: ","))
        }
        text.append(contentsOf: text[9..<firstEnd])
        text.append(contentsOf: Array("))".utf8))
        return String(decoding: text, as: UTF8.self)
    }
}
