import EnrichmentCore
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("CFormat: printf's %.Nf")
struct CFormatTests {
    /// What the C library prints, the reference.
    static func printf(_ value: Double, _ decimals: Int) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 400) { buffer in
            _ = withVaList([value]) { vsnprintf(buffer.baseAddress!, buffer.count, "%.\(decimals)f", $0) }
            return String(cString: buffer.baseAddress!)
        }
    }

    @Test("the same text as vsnprintf for coordinates, distances, halves, tiny and huge values, and signs")
    func matchesPrintf() {
        var values: [Double] = [
            0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.125, 0.375, 2.2945, 48.858844, -122.4194155, 179.9999995, 1e-7, -1e-7,
            5e-324, 1e-300, 0.0000005, 0.00000049999, 9.95, 99.5, 1234567.8901234, 0x1p62, -0x1p62 + 1, 0x1p63 - 1024,
            .ulpOfOne, 1 - .ulpOfOne, 0.1, 0.2, 0.3, 1.0 / 3.0, 2.0 / 3.0, 5e-10, 4.9999999999999e-10,
            2.2250738585072014e-308, -(0x1p63 - 1024), -0.5, 0.5,
        ]
        // Seeded, so that a failure comes back the same.
        var generator = SeededGenerator(seed: 0x5EED_CF0A)
        for _ in 0..<20_000 {
            values.append(Double.random(in: -180...180, using: &generator))
            values.append(Double.random(in: 0...20_000, using: &generator))
            // Exact halves at the last kept digit: the rounding rule itself.
            values.append(Double(Int.random(in: -1_000_000...1_000_000, using: &generator)) / 8)
        }
        var mismatches: [String] = []
        for value in values {
            for decimals in [0, 1, 2, 5, 6, 9] {
                let expected = Self.printf(value, decimals)
                let got = CFormat.fixed(value, decimals: decimals)
                if got != expected { mismatches.append("\(value) %.\(decimals)f: \(got) != \(expected)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10))")
    }

    @Test("values it does not compute itself still come out as printf's (infinity, NaN, over 2^63, 10 decimals)")
    func fallsBack() {
        #expect(CFormat.fixed(.infinity) == "inf")
        #expect(CFormat.fixed(-.infinity, decimals: 2) == "-inf")
        #expect(CFormat.fixed(.nan, decimals: 1) == Self.printf(.nan, 1))
        #expect(CFormat.fixed(1e20, decimals: 1) == "100000000000000000000.0")
        #expect(CFormat.fixed(0.1, decimals: 10) == "0.1000000000")
        var text: [UInt8] = []
        CFormat.appendFixed(-2.5, to: &text)
        #expect(String(decoding: text, as: UTF8.self) == "-2.500000")
    }
}
