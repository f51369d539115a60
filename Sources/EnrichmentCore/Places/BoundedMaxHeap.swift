/// A fixed-capacity max-heap keeping the `capacity` best-ranked candidates seen so far.
///
/// Rank is haversine metres, then the caller's tie-break (store id order), so results are exact and deterministic
/// even when two places sit at exactly the same distance.
struct BoundedMaxHeap {
    struct Entry {
        var item: Int32
        var metres: Double
        /// Squared chord on the unit sphere, kept to bound the tree search.
        var chordSquared: Double
    }

    private(set) var entries: [Entry] = []
    let capacity: Int
    /// Orders two items at exactly equal distance; nil means by item number.
    let precedes: ((Int, Int) -> Bool)?
    /// Squared chord beyond which no point can enter: infinity until full, then the root's chord plus a margin
    /// larger than the rounding difference between chord and haversine arithmetic.
    private(set) var chordBound = Double.infinity
    static let chordMargin = 1e-12

    init(capacity: Int, precedes: ((Int, Int) -> Bool)?) {
        self.capacity = capacity
        self.precedes = precedes
        entries.reserveCapacity(capacity)
    }

    /// True when `a` ranks after `b` (farther, or equally far and later in tie-break order).
    @inline(__always) private func ranksAfter(_ a: Entry, _ b: Entry) -> Bool {
        if a.metres != b.metres { return a.metres > b.metres }
        if let precedes { return precedes(Int(b.item), Int(a.item)) }
        return a.item > b.item
    }

    /// True when a candidate `metres` away could still enter the heap.
    @inline(__always) func admits(metres: Double) -> Bool {
        entries.count < capacity || metres <= entries[0].metres
    }

    mutating func insert(_ entry: Entry) {
        if entries.count < capacity {
            entries.append(entry)
            var child = entries.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard ranksAfter(entries[child], entries[parent]) else { break }
                entries.swapAt(parent, child)
                child = parent
            }
        } else {
            guard ranksAfter(entries[0], entry) else { return }
            entries[0] = entry
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var largest = parent
                if left < entries.count, ranksAfter(entries[left], entries[largest]) { largest = left }
                if right < entries.count, ranksAfter(entries[right], entries[largest]) { largest = right }
                if largest == parent { break }
                entries.swapAt(parent, largest)
                parent = largest
            }
        }
        if entries.count == capacity {
            let chord = entries[0].chordSquared.squareRoot() + Self.chordMargin
            chordBound = chord * chord
        }
    }

    /// Entries best first.
    func sortedAscending() -> [Entry] {
        entries.sorted { ranksAfter($1, $0) }
    }
}
