#if canImport(Glibc)
import Glibc
#endif

/// The system's random generator read in blocks: one read of the kernel's generator for up to 512 values instead
/// of one system call per value (`SystemRandomNumberGenerator` makes one for each `next()`). For many draws in a
/// row, e.g. a push's apns-ids (`RandomUUID`). A class: a copy would hand out the same values again.
public final class BufferedSystemRandom: RandomNumberGenerator {
    private var block: [UInt64]
    private var position: Int

    /// `expected`: about how many values will be drawn (a block holds that many, 2 to 512; more are read as
    /// needed), so a push to one device reads 16 bytes, not 4 KiB.
    public init(expected: Int = 512) {
        block = [UInt64](repeating: 0, count: min(512, max(2, expected)))
        position = block.count
    }

    public func next() -> UInt64 {
        if position == block.count { refill() }
        defer { position += 1 }
        return block[position]
    }

    private func refill() {
        position = 0
        #if canImport(Glibc)
        // The kernel's generator as a file (what `getrandom` reads; Glibc's module does not export it).
        let descriptor = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        if descriptor >= 0 {
            defer { close(descriptor) }
            let wanted = block.count * MemoryLayout<UInt64>.size
            let got = block.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, wanted) }
            if got == wanted { return }
        }
        #endif
        // Not Linux, or a short read: one system call per value, as `SystemRandomNumberGenerator` does.
        var system = SystemRandomNumberGenerator()
        for index in block.indices { block[index] = system.next() }
    }
}
