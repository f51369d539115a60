/// Random (version 4) UUIDs as lowercase text, the form APNs's `apns-id` and the service's ids take.
///
/// Foundation's `UUID()` on Linux opens and reads `/dev/urandom` for each one; a push to 1,000 devices makes 1,000
/// of them, and that showed as 3% of the service's CPU in enrich-and-send. These come from the system's generator
/// (`getrandom`), formatted without an intermediate `UUID` or `lowercased()`.
public enum RandomUUID {
    /// A new random UUID (RFC 9562 version 4, variant 10), e.g. `"0b4f3c4e-8a1d-4b7e-9c2a-5d6e7f8a9b0c"`.
    public static func lowercased() -> String {
        var generator = SystemRandomNumberGenerator()
        return lowercased(using: &generator)
    }

    /// The same from a given generator (a seeded one in tests).
    public static func lowercased(using generator: inout some RandomNumberGenerator) -> String {
        // Bytes 0-7 and 8-15, big-endian: the version is the high nibble of byte 6, the variant the top two bits of
        // byte 8.
        let high: UInt64 = (generator.next() & ~0xF000) | 0x4000
        let low: UInt64 = (generator.next() & ~(0xC0 << 56)) | (0x80 << 56)
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            func put(_ value: UInt64, nibbles: ClosedRange<Int>) {
                for nibble in nibbles.reversed() {
                    if position == 8 || position == 13 || position == 18 || position == 23 {
                        buffer[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    buffer[position] = digits.utf8Start[Int((value >> UInt64(nibble * 4)) & 0xF)]
                    position += 1
                }
            }
            put(high, nibbles: 0...15)
            put(low, nibbles: 0...15)
            return position
        }
    }
}
