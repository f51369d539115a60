public import Essentials

extension ZoneOfInterest: JSONObjectRepresentable {
    /// The fields of docs/LOCATION-RULES.md §6, names fixed.
    public func writeJSON(into object: inout JSONObjectWriter) {
        object.field("id", id)
        object.field("latitude", latitude)
        object.field("longitude", longitude)
        object.field("mean_x", meanX)
        object.field("mean_y", meanY)
        object.field("covariance_inverse", json: .array(inverse.map { .double($0) }))
        object.field("covariance_det", det)
        object.field("prior_probability", prior)
        object.field("accumulator", accumulator)
        object.field("age", age)
        object.field("start_time", startTime)
        object.field("end_time", endTime)
        object.field("duration", duration)
        object.field("weekly_density", json: .array(weeklyDensity.map { .double($0) }))
        if let period { object.field("period", period) } else { object.field("period", json: .null) }
        object.field("wkt_polygon", wktPolygon)
        object.field("visit_ids", strings: visitIds)
    }
}

extension Visit: JSONObjectRepresentable {
    /// The POST shape plus what the service adds (`source`, `recorded_at`).
    public func writeJSON(into object: inout JSONObjectWriter) {
        object.field("id", id)
        object.field("arrival", arrival)
        object.field("departure", departure)
        object.field("latitude", latitude)
        object.field("longitude", longitude)
        object.field("horizontal_accuracy", horizontalAccuracy)
        object.field("recorded_at", recordedAt)
        object.field("source", source)
    }
}

/// `{"zois": [...]}`, the body of `GET /v1/devices/{id}/zois` and the output of `enrichment-server zois`.
public struct ZOIList: JSONObjectRepresentable {
    public var zois: [ZoneOfInterest]
    public init(_ zois: [ZoneOfInterest]) { self.zois = zois }
    public func writeJSON(into object: inout JSONObjectWriter) { object.field("zois", objects: zois) }
}
