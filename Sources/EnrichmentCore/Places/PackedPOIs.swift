import Essentials
import Foundation

/// POIs packed one after another in one byte arena: what the places index keeps per place (docs/SCALING.md,
/// "Memory"). A search reads only the coordinates (in the tree) and, for a filter, the fields it tests; a result
/// is decoded into a `POI` for the few places returned.
///
/// A record is: latitude and longitude (8 bytes each, the exact doubles), then store id, name, city, zipcode,
/// country code, address lines, types, tags, contact and user properties (the last two as compact JSON), each string
/// as a varint length and its UTF-8 bytes (an optional one as length + 1, 0 for none; a list as a varint count).
/// Store ids are found through an open-addressing table of record numbers keyed by their bytes (as the
/// database compares them).
/// One stored POI row's columns, as bytes valid during a call (what the places index is built from at start-up).
public struct RawPOIRow {
    public var latitude: Double
    public var longitude: Double
    public var storeId: UnsafeBufferPointer<UInt8>
    public var name: UnsafeBufferPointer<UInt8>
    public var city: UnsafeBufferPointer<UInt8>?
    public var zipcode: UnsafeBufferPointer<UInt8>?
    public var countryCode: UnsafeBufferPointer<UInt8>?
    /// JSON arrays of strings, as stored.
    public var addressLines: UnsafeBufferPointer<UInt8>?
    public var types: UnsafeBufferPointer<UInt8>?
    public var tags: UnsafeBufferPointer<UInt8>?
    /// JSON text, as stored.
    public var contact: UnsafeBufferPointer<UInt8>?
    public var userProperties: UnsafeBufferPointer<UInt8>?

    public init(
        latitude: Double, longitude: Double, storeId: UnsafeBufferPointer<UInt8>, name: UnsafeBufferPointer<UInt8>,
        city: UnsafeBufferPointer<UInt8>?, zipcode: UnsafeBufferPointer<UInt8>?,
        countryCode: UnsafeBufferPointer<UInt8>?, addressLines: UnsafeBufferPointer<UInt8>?,
        types: UnsafeBufferPointer<UInt8>?, tags: UnsafeBufferPointer<UInt8>?, contact: UnsafeBufferPointer<UInt8>?,
        userProperties: UnsafeBufferPointer<UInt8>?
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.storeId = storeId
        self.name = name
        self.city = city
        self.zipcode = zipcode
        self.countryCode = countryCode
        self.addressLines = addressLines
        self.types = types
        self.tags = tags
        self.contact = contact
        self.userProperties = userProperties
    }
}

struct PackedPOIs: Sendable {
    private(set) var bytes: [UInt8] = []
    /// Start of each record, and the end of the last.
    private(set) var starts: [Int] = [0]
    /// Record numbers by store id (-1: empty); a power of two, at most half full.
    private var table: [Int32] = []
    /// Records replaced by a later one with the same store id (while building).
    private(set) var replaced = 0

    var count: Int { starts.count - 1 }

    init() {}

    /// Whether records are entered in the id table as they are appended (off while gathering rows whose ids are
    /// known to be unique: the table is made once, for the final order).
    var indexesIds = true

    /// Reserves room for about `count` records of `bytesEach`, and an id table for them.
    mutating func reserve(_ count: Int, bytesEach: Int = 128) {
        bytes.reserveCapacity(count * bytesEach)
        starts.reserveCapacity(count + 1)
        if indexesIds, table.count < 4 * (count + 1) {
            var size = 16
            while size < 4 * (count + 1) { size <<= 1 }
            table = [Int32](repeating: -1, count: size)
        }
    }

    // MARK: Writing

    /// Appends a record; returns the number of the record it replaces (same store id), if any, which keeps its
    /// bytes but is no longer found by id.
    @discardableResult
    mutating func append(_ poi: POI) -> Int? {
        Self.writeDouble(poi.coordinate.latitude, &bytes)
        Self.writeDouble(poi.coordinate.longitude, &bytes)
        Self.writeString(poi.storeId, &bytes)
        Self.writeString(poi.name, &bytes)
        Self.writeOptional(poi.address.city, &bytes)
        Self.writeOptional(poi.address.zipcode, &bytes)
        Self.writeOptional(poi.address.countryCode, &bytes)
        Self.writeList(poi.address.lines, &bytes)
        Self.writeList(poi.types, &bytes)
        Self.writeList(poi.tags, &bytes)
        Self.writeOptional(poi.contact.map { String(decoding: JSONWriter.bytes($0), as: UTF8.self) }, &bytes)
        Self.writeOptional(poi.userProperties.map { String(decoding: JSONWriter.bytes($0), as: UTF8.self) }, &bytes)
        starts.append(bytes.count)
        return indexesIds ? index(count - 1) : nil
    }

    /// Appends a stored row's columns as they are read (no `POI` made): the lists are the stored JSON arrays of
    /// strings, contact and user properties the stored JSON text. Returns the record it replaces, as `append`.
    @discardableResult
    mutating func append(raw row: RawPOIRow) -> Int? {
        Self.writeDouble(row.latitude, &bytes)
        Self.writeDouble(row.longitude, &bytes)
        // The store id as stored (it is the id table's key, compared byte for byte as the database compares it).
        Self.writeBytes(row.storeId, &bytes)
        Self.writeText(row.name, &bytes)
        Self.writeOptionalText(row.city, &bytes)
        Self.writeOptionalText(row.zipcode, &bytes)
        Self.writeOptionalText(row.countryCode, &bytes)
        Self.writeJSONList(row.addressLines, &bytes)
        Self.writeJSONList(row.types, &bytes)
        Self.writeJSONList(row.tags, &bytes)
        Self.writeOptionalBytes(row.contact, &bytes)
        Self.writeOptionalBytes(row.userProperties, &bytes)
        starts.append(bytes.count)
        return indexesIds ? index(count - 1) : nil
    }

    /// The records of `gathered` in `order` (record `n` of the result is `gathered`'s `order[n]`), with their id
    /// table; the two are made side by side (the start-up of a large index). Ids must be unique.
    static func reordered(_ gathered: PackedPOIs, _ order: [Int]) -> PackedPOIs {
        let records = Box(PackedPOIs())
        let table = Box([Int32]())
        DispatchQueue.concurrentPerform(iterations: 2) { part in
            if part == 0 {
                var result = PackedPOIs()
                result.indexesIds = false
                result.reserve(order.count, bytesEach: gathered.bytes.count / max(1, gathered.count))
                for i in order { result.append(recordOf: gathered, at: i) }
                result.shrink()
                records.value = result
            } else {
                table.value = gathered.idTable(order)
            }
        }
        var result = records.value
        result.table = table.value
        result.indexesIds = true
        return result
    }

    /// An id table for `order` (entry `n` is record `order[n]` of this arena), without comparisons (ids unique).
    func idTable(_ order: [Int]) -> [Int32] {
        var size = 16
        while size < 4 * (order.count + 1) { size <<= 1 }
        var table = [Int32](repeating: -1, count: size)
        let mask = size - 1
        for (n, i) in order.enumerated() {
            var slot = hash(idRange(i)) & mask
            while table[slot] >= 0 { slot = (slot + 1) & mask }
            table[slot] = Int32(n)
        }
        return table
    }

    /// Appends every record of `other` as they are (gathering only: ids are not entered in the table).
    mutating func append(contentsOf other: PackedPOIs) {
        precondition(!indexesIds, "appending a whole arena is for gathering unique rows")
        let offset = bytes.count
        bytes.append(contentsOf: other.bytes)
        starts.append(contentsOf: other.starts.dropFirst().map { $0 + offset })
    }

    /// Appends record `i` of `other` as it is (no decoding); returns the record it replaces, as `append`.
    @discardableResult
    mutating func append(recordOf other: PackedPOIs, at i: Int) -> Int? {
        bytes.append(contentsOf: other.bytes[other.starts[i]..<other.starts[i + 1]])
        starts.append(bytes.count)
        return indexesIds ? index(count - 1) : nil
    }

    /// Enters record `i` in the id table; returns the record it displaces.
    private mutating func index(_ i: Int) -> Int? {
        if table.count < 2 * (count + 1) { grow() }
        let mask = table.count - 1
        let id = idRange(i)
        var slot = hash(id) & mask
        while table[slot] >= 0 {
            let other = Int(table[slot])
            if sameId(idRange(other), id) {
                table[slot] = Int32(i)
                replaced += 1
                return other
            }
            slot = (slot + 1) & mask
        }
        table[slot] = Int32(i)
        return nil
    }

    private func sameId(_ a: Range<Int>, _ b: Range<Int>) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return bytes.withUnsafeBufferPointer { all in
            memcmp(all.baseAddress! + a.lowerBound, all.baseAddress! + b.lowerBound, a.count) == 0
        }
    }

    private func hash(_ range: Range<Int>) -> Int {
        bytes.withUnsafeBufferPointer { Self.hash(UnsafeBufferPointer(rebasing: $0[range])) }
    }

    private mutating func grow() {
        var size = 16
        while size < 4 * (count + 1) { size <<= 1 }
        let old = table
        table = [Int32](repeating: -1, count: size)
        let mask = size - 1
        for entry in old where entry >= 0 {
            var slot = hash(idRange(Int(entry))) & mask
            while table[slot] >= 0 { slot = (slot + 1) & mask }
            table[slot] = entry
        }
    }

    /// Frees the spare capacity of a finished arena.
    mutating func shrink() {
        bytes = Array(bytes)
        starts = Array(starts)
    }

    // MARK: Reading

    /// The record number of a store id, if present.
    func record(storeId: String) -> Int? {
        guard !table.isEmpty else { return nil }
        var id = storeId
        return id.withUTF8 { key -> Int? in
            let mask = table.count - 1
            var slot = Self.hash(key) & mask
            while table[slot] >= 0 {
                let candidate = Int(table[slot])
                let range = idRange(candidate)
                if range.count == key.count,
                    key.isEmpty
                        || bytes.withUnsafeBufferPointer({
                            memcmp($0.baseAddress! + range.lowerBound, key.baseAddress!, key.count) == 0
                        })
                {
                    return candidate
                }
                slot = (slot + 1) & mask
            }
            return nil
        }
    }

    func coordinate(at i: Int) -> Coordinate {
        let start = starts[i]
        return Coordinate(latitude: Self.readDouble(bytes, start), longitude: Self.readDouble(bytes, start + 8))
    }

    /// The bytes of record `i`'s store id.
    private func idRange(_ i: Int) -> Range<Int> {
        var at = starts[i] + 16
        let length = Self.readVarint(bytes, &at)
        return at..<(at + length)
    }

    func storeId(at i: Int) -> String { String(decoding: bytes[idRange(i)], as: UTF8.self) }

    /// Record `i` as a POI (without its contact and user properties, left unparsed, unless `details`).
    func poi(at i: Int, details: Bool = true) -> POI { Self.poi(bytes, start: starts[i], details: details) }

    /// Record `i` as a search hands it on: its bytes, decoded only where read (`PlaceMatch`).
    func record(at i: Int, details: Bool) -> PackedPOIRecord {
        PackedPOIRecord(bytes: bytes, start: starts[i], details: details)
    }

    /// The record starting at `start` of `bytes` as a POI.
    static func poi(_ bytes: [UInt8], start: Int, details: Bool) -> POI {
        var reader = Reader(bytes: bytes, at: start + 16)
        let storeId = reader.string()
        let name = reader.string()
        var address = POI.Address()
        address.city = reader.optional()
        address.zipcode = reader.optional()
        address.countryCode = reader.optional()
        address.lines = reader.list()
        let types = reader.list()
        let tags = reader.list()
        var contact: JSONValue?
        var user: JSONValue?
        if details {
            contact = reader.optional().flatMap { try? JSONValue.decode(Data($0.utf8)) }
            user = reader.optional().flatMap { try? JSONValue.decode(Data($0.utf8)) }
        }
        let coordinate = Coordinate(latitude: readDouble(bytes, start), longitude: readDouble(bytes, start + 8))
        return POI(
            storeId: storeId, name: name, coordinate: coordinate, address: address, types: types, tags: tags,
            contact: contact, userProperties: user)
    }

    /// Whether record `i` passes `filter`, reading only the fields its clauses test.
    func matches(_ filter: PlaceFilter, at i: Int) -> Bool {
        switch filter {
        case .clause(let clause): matches(clause, at: i)
        case .and(let lhs, let rhs): matches(lhs, at: i) && matches(rhs, at: i)
        case .or(let lhs, let rhs): matches(lhs, at: i) || matches(rhs, at: i)
        case .not(let inner): !matches(inner, at: i)
        }
    }

    private func matches(_ clause: PlaceFilter.Clause, at i: Int) -> Bool {
        var reader = Reader(bytes: bytes, at: starts[i] + 16)
        if case .user(let path) = clause.field {
            reader.skip(9)
            let user = reader.optional().flatMap { try? JSONValue.decode(Data($0.utf8)) }
            return PlaceFilter.Clause.compare(user?[path: path], clause.comparison, clause.value)
        }
        // The parser gives the store's own fields string values only.
        guard case .string(let text) = clause.value else { return false }
        switch clause.field {
        case .idstore: return reader.string() == text
        case .name:
            reader.skip(1)
            return reader.string() == text
        case .city:
            reader.skip(2)
            return reader.optional() == text
        case .country:
            reader.skip(4)
            return reader.optional() == text
        case .type:
            reader.skip(6)
            return reader.list().contains(text)
        case .tag:
            reader.skip(7)
            return reader.list().contains(text)
        case .user: return false
        }
    }

}

/// What one of two side-by-side tasks hands back (each box is written by one task, read after both end).
private final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}
