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
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 400) { buffer in
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
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 400) { buffer in
            let count = withVaList([value]) { vsnprintf(buffer.baseAddress!, buffer.count, "%f", $0) }
            let length = min(Int(count), buffer.count - 1)
            output.append(
                contentsOf: UnsafeRawBufferPointer(start: buffer.baseAddress!, count: length).bindMemory(to: UInt8.self)
            )
        }
    }
}
