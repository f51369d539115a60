import Essentials
import Foundation
import Testing

@Suite("RandomUUID")
struct RandomUUIDTests {
    @Test("is a lowercase version-4 UUID that Foundation parses back to the same value")
    func shape() throws {
        for _ in 0..<1000 {
            let text = RandomUUID.lowercased()
            #expect(text.utf8.count == 36)
            #expect(text == text.lowercased())
            let parsed = try #require(UUID(uuidString: text))
            #expect(parsed.uuidString.lowercased() == text)
            let bytes = withUnsafeBytes(of: parsed.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4, "version nibble of \(text)")
            #expect(bytes[8] >> 6 == 0b10, "variant bits of \(text)")
        }
    }

    @Test("puts a generator's bits in order, with only the version and variant bits changed")
    func bitsInOrder() {
        struct Fixed: RandomNumberGenerator {
            var values: [UInt64]
            mutating func next() -> UInt64 { values.removeFirst() }
        }
        var zeros = Fixed(values: [0, 0])
        #expect(RandomUUID.lowercased(using: &zeros) == "00000000-0000-4000-8000-000000000000")
        var ones = Fixed(values: [.max, .max])
        #expect(RandomUUID.lowercased(using: &ones) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
        var counting = Fixed(values: [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210])
        #expect(RandomUUID.lowercased(using: &counting) == "01234567-89ab-4def-bedc-ba9876543210")
    }

    @Test("does not repeat in 100,000 draws, one by one or from the buffered system generator")
    func distinct() {
        var seen = Set<String>()
        for _ in 0..<100_000 { seen.insert(RandomUUID.lowercased()) }
        #expect(seen.count == 100_000)
        var random = BufferedSystemRandom()
        for _ in 0..<100_000 { seen.insert(RandomUUID.lowercased(using: &random)) }
        #expect(seen.count == 200_000)
    }

    @Test("the buffered system generator's blocks differ, and its bits are balanced, whatever its block size")
    func bufferedBits() {
        var small = BufferedSystemRandom(expected: 1)
        let pairs = (0..<512).map { _ in small.next() }
        #expect(Set(pairs).count == pairs.count)
        var random = BufferedSystemRandom()
        // Over two blocks (1,024 values) and more: no value repeats, and about half of all bits are set.
        let values = (0..<2048).map { _ in random.next() }
        #expect(Set(values).count == values.count)
        let ones = values.reduce(0) { $0 + $1.nonzeroBitCount }
        let bits = values.count * 64
        #expect(abs(Double(ones) / Double(bits) - 0.5) < 0.01)
    }
}
