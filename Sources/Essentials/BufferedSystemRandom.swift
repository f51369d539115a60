#if canImport(Glibc)
import Glibc
#endif

/// The system's random generator read in blocks: one read of the kernel's generator for 512 values instead of one
/// system call per value
/// (`SystemRandomNumberGenerator` makes a system call for each `next()`). For many draws in a row, e.g. a push's
/// apns-ids (`RandomUUID`); the same source, so the same quality.
public struct BufferedSystemRandom: RandomNumberGenerator {
    private var block = [UInt64](repeating: 0, count: 512)
    private var position = 512

    public init() {}

    public mutating func next() -> UInt64 {
        if position == block.count { refill() }
        defer { position += 1 }
        return block[position]
    }

    private mutating func refill() {
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
