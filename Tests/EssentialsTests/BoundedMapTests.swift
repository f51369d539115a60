import Essentials
import Testing

@Suite struct BoundedMapTests {
    @Test func holdsAtMostItsCapacityAndForgetsTheLeastRecentlyUsed() {
        var map = BoundedMap<Int, String>(capacity: 4)
        for i in 0..<4 { map[i] = "v\(i)" }
        #expect(map.count == 4)
        // 0 is used again: it moves to the recent generation and outlives 1.
        #expect(map[0] == "v0")
        for i in 4..<6 { map[i] = "v\(i)" }
        #expect(map.count <= 4)
        #expect(map.peek(0) == "v0")
        #expect(map.peek(1) == nil)
        #expect(map.evictions > 0)
        for i in 0..<1000 { map[i] = "w\(i)" }
        #expect(map.count <= 4)
        #expect(map.peek(999) == "w999")
        #expect(map.evictions >= 996)
    }

    @Test func replacingAndRemovingKeepOneEntryPerKey() {
        var map = BoundedMap<String, Int>(capacity: 10)
        map["a"] = 1
        map["a"] = 2
        #expect(map.count == 1)
        #expect(map["a"] == 2)
        map["a"] = nil
        #expect(map["a"] == nil)
        #expect(map.count == 0)
        var none = BoundedMap<String, Int>(capacity: 0)
        none["x"] = 1
        #expect(none["x"] == nil)
        #expect(none.count == 0)
    }
}
