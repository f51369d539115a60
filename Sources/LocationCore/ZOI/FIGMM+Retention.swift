extension FIGMM {
    /// The intended per-visit removal of docs/LOCATION-RULES.md §5.3: expiring ids leave every ZOI; ZOIs left
    /// without visits go; priors are recomputed and polygons regenerated; duration and times come from the
    /// remaining visits. Mean, C, det, A, age, weekly density and period stay (no unlearning). Not the SDK's
    /// wipe-out bug.
    public static func removeVisits(
        _ expiring: Set<String>, from zois: [ZoneOfInterest], remaining: [Visit]
    ) -> [ZoneOfInterest] {
        var byId: [String: Visit] = [:]
        for v in remaining { byId[v.id] = v }
        var kept: [ZoneOfInterest] = []
        for var zoi in zois {
            zoi.visitIds.removeAll { expiring.contains($0) }
            let visits = zoi.visitIds.compactMap { byId[$0] }
            guard !visits.isEmpty else { continue }
            zoi.duration = visits.reduce(0) { $0 + $1.duration }
            zoi.startTime = visits.map(\.arrival).min()!
            zoi.endTime = visits.map(\.departure).max()!
            kept.append(zoi)
        }
        var sum = 0.0
        for z in kept { sum += z.accumulator }
        for j in kept.indices {
            kept[j].prior = kept[j].accumulator / sum
            kept[j].wktPolygon = ZOIPolygon.wkt(meanX: kept[j].meanX, meanY: kept[j].meanY, inverse: kept[j].inverse)
        }
        return kept
    }
}
