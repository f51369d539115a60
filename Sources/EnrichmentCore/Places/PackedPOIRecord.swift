import Essentials

/// One record of a places index's arena, as a search found it: the arena's bytes (shared, not copied) and where the
/// record starts. A match keeps this instead of a decoded `POI`: an enrichment reads a POI's fields once, to write
/// its answer, and writes them from these bytes (BENCHMARKS.md, issue 49, sixth session).
struct PackedPOIRecord: Sendable {
    let bytes: [UInt8]
    /// The record's first byte (its latitude).
    let start: Int
    /// Whether a decoded POI carries its contact and user properties (`PlacesQuery.details`).
    let details: Bool

    var coordinate: Coordinate {
        Coordinate(latitude: PackedPOIs.readDouble(bytes, start), longitude: PackedPOIs.readDouble(bytes, start + 8))
    }

    var storeId: String {
        var reader = PackedPOIs.Reader(bytes: bytes, at: start + 16)
        return reader.string()
    }

    /// The record as a POI.
    func poi() -> POI { PackedPOIs.poi(bytes, start: start, details: details) }

    /// Writes the answer's POI members (`store_id`, `name`, `latitude`, `longitude`, `distance`, `city`,
    /// `zipcode`, `country_code`, `types`, `tags`) straight from the record's bytes: the same members, in the same
    /// order and with the same escaping, as `EnrichmentResult.POIUsed` writes from a POI's strings.
    func writeAnswerFields(distance: Double, into o: inout JSONObjectWriter) {
        bytes.withUnsafeBufferPointer { all in
            var at = start + 16
            func next() -> UnsafeBufferPointer<UInt8> {
                let length = PackedPOIs.readVarint(all, &at)
                defer { at += length }
                return UnsafeBufferPointer(rebasing: all[at..<(at + length)])
            }
            func optional() -> UnsafeBufferPointer<UInt8>? {
                let marker = PackedPOIs.readVarint(all, &at)
                guard marker > 0 else { return nil }
                defer { at += marker - 1 }
                return UnsafeBufferPointer(rebasing: all[at..<(at + marker - 1)])
            }
            // A store id is kept as stored (the id table's key): one that is not UTF-8 (a row edited outside the
            // service) is written as a decoded POI's would be.
            let storeId = next()
            if PackedPOIs.isValidUTF8(storeId) {
                o.field("store_id", utf8: storeId)
            } else {
                o.field("store_id", String(decoding: storeId, as: UTF8.self))
            }
            o.field("name", utf8: next())
            let coordinate = coordinate
            o.field("latitude", coordinate.latitude)
            o.field("longitude", coordinate.longitude)
            o.field("distance", distance)
            if let city = optional() { o.field("city", utf8: city) }
            if let zipcode = optional() { o.field("zipcode", utf8: zipcode) }
            if let countryCode = optional() { o.field("country_code", utf8: countryCode) }
            // The address lines are not in the answer.
            for _ in 0..<PackedPOIs.readVarint(all, &at) { at += PackedPOIs.readVarint(all, &at) }
            o.strings("types", count: PackedPOIs.readVarint(all, &at)) { _ in next() }
            o.strings("tags", count: PackedPOIs.readVarint(all, &at)) { _ in next() }
        }
    }
}
