#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// printf-exact number formatting without Foundation's `String(format:)` (which is slow on Linux).
public enum CFormat {
    /// `value` formatted like printf's `%.<decimals>f` (`%f` is 6 decimals).
    public static func fixed(_ value: Double, decimals: Int = 6) -> String {
        if let text = exactFixed(value, decimals: decimals) { return text }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 400) { buffer in
            let format = "%.\(decimals)f"
            let count = withVaList([value]) { vsnprintf(buffer.baseAddress!, buffer.count, format, $0) }
            let length = min(Int(count), buffer.count - 1)
            return String(
                decoding: UnsafeRawBufferPointer(start: buffer.baseAddress!, count: length).bindMemory(to: UInt8.self),
                as: UTF8.self)
        }
    }

    /// Appends `value` formatted like printf's `%f` to `output` (no intermediate String).
    public static func appendFixed(_ value: Double, to output: inout [UInt8]) {
        output.append(contentsOf: fixed(value).utf8)
    }

    /// `%.<decimals>f` computed in integers, for finite values under 2^63 and at most 9 decimals (coordinates,
    /// distances), else nil (then `vsnprintf` does it).
    ///
    /// A double is exactly `significand x 2^exponent`, so `value x 10^decimals` is an exact fraction whose
    /// rounding to an integer is decided by comparing the remainder with one half: above rounds up, below down, an
    /// exact half to even, as glibc's printf does in the default rounding mode. It is the same text, without
    /// `withVaList`'s boxing (4% of enrich-and-send's CPU went to formatting coordinates for map URLs).
    static func exactFixed(_ value: Double, decimals: Int) -> String? {
        guard value.isFinite, (0...9).contains(decimals), value.magnitude < 0x1p63 else { return nil }
        var scale: UInt64 = 1
        for _ in 0..<decimals { scale *= 10 }
        let magnitude = value.magnitude
        var rounded: UInt128
        if magnitude == 0 {
            rounded = 0
        } else {
            // magnitude = significand x 2^exponent with an integer significand below 2^53.
            let exponent = Int(magnitude.exponent) - Double.significandBitCount
            let significand = UInt128(magnitude.significandBitPattern | (magnitude.isNormal ? 1 << 52 : 0))
            let adjusted = magnitude.isNormal ? exponent : -1074
            let numerator = significand * UInt128(scale)  // < 2^53 x 10^9 < 2^83
            if adjusted >= 0 {
                rounded = numerator << UInt128(adjusted)  // an integer: < 2^63 x 10^9 < 2^93
            } else if -adjusted >= 100 {
                // The value x 10^decimals is below 2^83 / 2^100: far under one half, so it rounds to 0.
                rounded = 0
            } else {
                let shift = UInt128(-adjusted)
                let quotient = numerator >> shift
                let remainder = numerator - (quotient << shift)
                let half = UInt128(1) << (shift - 1)
                rounded = quotient
                if remainder > half || (remainder == half && quotient & 1 == 1) { rounded += 1 }
            }
        }
        // Coordinates and distances fit 64 bits: divided there, not in UInt128's software division.
        let (whole, fraction): (String, UInt64)
        if let small = UInt64(exactly: rounded) {
            whole = String(small / scale)
            fraction = small % scale
        } else {
            whole = String(rounded / UInt128(scale))
            fraction = UInt64(rounded % UInt128(scale))
        }
        var text = value.sign == .minus ? "-" : ""
        text += whole
        if decimals > 0 {
            let digits = String(fraction)
            text += "."
            text += String(repeating: "0", count: decimals - digits.count)
            text += digits
        }
        return text
    }
}
