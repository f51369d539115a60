/// A map that holds at most `capacity` entries and forgets the least recently used ones first (approximately):
/// entries live in two generations of `capacity / 2`; when the recent one is full it becomes the old one and the
/// old one is dropped; a hit in the old generation moves the entry back to the recent one.
///
/// Every per-device cache of the service is one of these (docs/SCALING.md, "Memory"): its memory is a function of
/// its budget, not of the population. O(1) per operation, no per-entry bookkeeping beyond the dictionaries.
public struct BoundedMap<Key: Hashable, Value> {
    public let capacity: Int
    private var recent: [Key: Value] = [:]
    private var older: [Key: Value] = [:]
    /// Entries dropped so far because the map was full.
    public private(set) var evictions = 0

    /// `capacity` of 0 keeps nothing.
    public init(capacity: Int) { self.capacity = max(0, capacity) }

    var generation: Int { max(1, capacity / 2) }

    /// Entries held now (at most `capacity`).
    public var count: Int { recent.count + older.count }

    /// The value, counting as a use: a hit in the older generation moves back to the recent one.
    public subscript(key: Key) -> Value? {
        mutating get {
            if let value = recent[key] { return value }
            guard let value = older.removeValue(forKey: key) else { return nil }
            insert(key, value)
            return value
        }
        set {
            if let newValue {
                if recent[key] != nil {
                    recent[key] = newValue
                } else {
                    older.removeValue(forKey: key)
                    insert(key, newValue)
                }
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// The value without counting as a use.
    public func peek(_ key: Key) -> Value? { recent[key] ?? older[key] }

    private mutating func insert(_ key: Key, _ value: Value) {
        guard capacity > 0 else {
            evictions += 1
            return
        }
        if recent.count >= generation {
            evictions += older.count
            // The dropped generation's table becomes the new recent one, emptied but with its room kept: a
            // generation of 100,000 would otherwise grow again from nothing, rehashing at each doubling.
            swap(&older, &recent)
            recent.removeAll(keepingCapacity: true)
        }
        recent[key] = value
    }

    @discardableResult
    public mutating func removeValue(forKey key: Key) -> Value? {
        recent.removeValue(forKey: key) ?? older.removeValue(forKey: key)
    }

    public mutating func removeAll() {
        recent = [:]
        older = [:]
    }
}

extension BoundedMap: Sendable where Key: Sendable, Value: Sendable {}
