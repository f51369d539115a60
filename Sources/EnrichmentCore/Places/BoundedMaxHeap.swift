/// A fixed-capacity max-heap keeping the `capacity` smallest squared chords seen so far.
///
/// Chord order is great-circle order up to rounding, so the heap only gathers candidates: `chordBound` widens the
/// worst kept chord by a margin larger than any rounding difference, and the caller re-ranks everything within it
/// by haversine metres.
struct BoundedMaxHeap {
    struct Entry {
        /// Slot of the point in the tree's arrays.
        var slot: Int32
        var chordSquared: Double
    }

    private(set) var entries: [Entry] = []
    let capacity: Int
    /// Squared chord beyond which no point can rank: infinity until full, then the worst chord plus the margin.
    private(set) var chordBound = Double.infinity
    /// On the unit sphere; about 6 µm on Earth, far above the ~1e-15 rounding of either arithmetic.
    static let chordMargin = 1e-12

    init(capacity: Int) {
        self.capacity = capacity
        entries.reserveCapacity(capacity)
    }

    var isFull: Bool { entries.count == capacity }
    var worst: Double { isFull ? entries[0].chordSquared : .infinity }

    /// Adds `entry` when it beats the worst kept one; returns the entry that no longer fits (evicted or refused).
    mutating func insert(_ entry: Entry) -> Entry? {
        var dropped: Entry?
        if entries.count < capacity {
            entries.append(entry)
            var child = entries.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard entries[parent].chordSquared < entries[child].chordSquared else { break }
                entries.swapAt(parent, child)
                child = parent
            }
        } else if entry.chordSquared < entries[0].chordSquared {
            dropped = entries[0]
            entries[0] = entry
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var largest = parent
                if left < entries.count, entries[left].chordSquared > entries[largest].chordSquared { largest = left }
                if right < entries.count, entries[right].chordSquared > entries[largest].chordSquared {
                    largest = right
                }
                if largest == parent { break }
                entries.swapAt(parent, largest)
                parent = largest
            }
        } else {
            dropped = entry
        }
        if isFull {
            let chord = entries[0].chordSquared.squareRoot() + Self.chordMargin
            chordBound = chord * chord
        }
        return dropped
    }
}
