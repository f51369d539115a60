/// A fixed-capacity max-heap keeping the `capacity` smallest distances seen so far.
struct BoundedMaxHeap {
    struct Entry { var item: Int32; var distanceSquared: Double }
    private(set) var entries: [Entry] = []
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        entries.reserveCapacity(capacity)
    }

    /// The largest kept distance, or infinity while the heap is not full.
    var worst: Double { entries.count < capacity ? .infinity : entries[0].distanceSquared }

    mutating func insert(item: Int32, distanceSquared: Double) {
        if entries.count < capacity {
            entries.append(Entry(item: item, distanceSquared: distanceSquared))
            var child = entries.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard entries[parent].distanceSquared < entries[child].distanceSquared else { break }
                entries.swapAt(parent, child)
                child = parent
            }
        } else if distanceSquared < entries[0].distanceSquared {
            entries[0] = Entry(item: item, distanceSquared: distanceSquared)
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var largest = parent
                if left < entries.count, entries[left].distanceSquared > entries[largest].distanceSquared { largest = left }
                if right < entries.count, entries[right].distanceSquared > entries[largest].distanceSquared { largest = right }
                if largest == parent { break }
                entries.swapAt(parent, largest)
                parent = largest
            }
        }
    }

    /// Entries nearest first; ties broken by item number so results are deterministic.
    func sortedAscending() -> [Entry] {
        entries.sorted { ($0.distanceSquared, $0.item) < ($1.distanceSquared, $1.item) }
    }
}
