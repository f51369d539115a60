import Foundation

/// The SDK's incremental Gaussian mixture over one device's visits (docs/LOCATION-RULES.md §2, FIGMM.swift), with the
/// store round trip of §2.10 around every visit.
///
/// Each formula keeps the SDK's evaluation order (Surge's products start from 0.0 and associate from the left);
/// `pow` is kept where the SDK calls it, as `libcPow`, which no optimiser turns into a multiplication (LibcPow.swift).
/// Do not "simplify" them: the bits change.
public struct FIGMM: Sendable {
    /// Run the time features and home/work labels (§3) after every visit.
    public var classificationEnabled: Bool
    /// Makes the id of a new ZOI from the visit that creates it (stable for the ZOI's life). The default,
    /// `zoi-<visit id>`, makes replays of one file give the same ids everywhere.
    public var makeId: @Sendable (Visit) -> String

    public init(
        classificationEnabled: Bool = true, makeId: @escaping @Sendable (Visit) -> String = { "zoi-\($0.id)" }
    ) {
        self.classificationEnabled = classificationEnabled
        self.makeId = makeId
    }

    /// χ²(0.95), the gate.
    public static let gate = ZOIPolygon.chiSquared(0.95)

    /// A ZOI during one visit's pipeline: the stored state plus what the load rebuilds.
    struct Working {
        var zoi: ZoneOfInterest
        var visits: [Visit]
        var weeks: Set<Int> = []
        /// The duration classification accumulates (stored duration + Σ dur(v)); not the saved one.
        var classificationDuration: Int
    }

    /// Density of a visit point under a ZOI: (q, f) of §2.4.
    @inline(__always) static func density(_ px: Double, _ py: Double, _ z: ZoneOfInterest) -> (q: Double, f: Double) {
        let e0 = px - z.meanX
        let e1 = py - z.meanY
        let s = ZOIPolygon.quadratic(e0, e1, z.inverse)
        let q = libcPow(sqrt(s), 2)
        let f = exp(-q / 2) / ((sqrt(z.det) * 2) * Double.pi)
        return (q, f)
    }

    /// Runs one visit through §2.3 over the stored ZOIs and returns the ZOIs to store.
    ///
    /// `storedVisit(id)` finds a stored visit by id (the load's lookup; missing ones are skipped).
    public func process(
        _ visit: Visit, zois stored: [ZoneOfInterest], storedVisit: (String) -> Visit?
    ) -> [ZoneOfInterest] {
        // The polygons as stored, by id: a zone whose mean and C did not move keeps its text (same inputs, same
        // bytes), which spares most of the %f formatting.
        var storedPolygons: [String: (Double, Double, [Double], String)] = [:]
        for z in stored { storedPolygons[z.id] = (z.meanX, z.meanY, z.inverse, z.wktPolygon) }
        // Load (§2.10).
        var zois = stored.map { z in
            Working(zoi: z, visits: z.visitIds.compactMap(storedVisit), classificationDuration: z.duration)
        }
        let px = SphericalMercator.lon2x(visit.longitude)
        let py = SphericalMercator.lat2y(visit.latitude)

        // 1. Update every ZOI whose gate passes, all with the densities before any update.
        let densities = zois.map { Self.density(px, py, $0.zoi) }
        var total = 0.0
        for (j, w) in zois.enumerated() { total += densities[j].f * w.zoi.prior }
        var updated = false
        for j in zois.indices where densities[j].q <= Self.gate {
            Self.update(&zois[j].zoi, px: px, py: py, f: densities[j].f, total: total)
            updated = true
        }
        // 2. A new component when no gate passed.
        if !updated {
            let sigma = 2.0 * visit.horizontalAccuracy
            let inv = libcPow(sigma, -2)
            let zoi = ZoneOfInterest(
                id: makeId(visit), meanX: px, meanY: py, inverse: [inv * 1.0, inv * 0.0, inv * 0.0, inv * 1.0],
                det: libcPow(libcPow(sigma, 2), 2), prior: 1.0, accumulator: 1.0, age: 1.0, visitIds: [],
                startTime: visit.arrival, endTime: visit.departure, duration: visit.duration,
                weeklyDensity: [Double](repeating: 0, count: 168), period: ZOIPeriod.unqualified, wktPolygon: "")
            zois.append(Working(zoi: zoi, visits: [], classificationDuration: visit.duration))
        }
        // 3. Priors.
        var sum = 0.0
        for w in zois { sum += w.zoi.accumulator }
        for j in zois.indices { zois[j].zoi.prior = zois[j].zoi.accumulator / sum }
        // 4. Assignment: the first index of the largest f·prior, with the current state.
        var winner = 0
        var best = -Double.infinity
        for (j, w) in zois.enumerated() {
            let u = Self.density(px, py, w.zoi).f * w.zoi.prior
            if j == 0 || u > best {
                best = u
                winner = j
            }
        }
        zois[winner].zoi.visitIds.append(visit.id)
        zois[winner].visits.append(visit)
        // 5. Removal of ZOIs without visits.
        zois.removeAll { $0.visits.isEmpty || $0.zoi.visitIds.isEmpty }
        // 6. Classification.
        if classificationEnabled { Self.classify(&zois) }
        // 7-8 and the save (§2.10): polygon, then duration and times recomputed from the visits.
        return zois.map { w in
            var z = w.zoi
            if let old = storedPolygons[z.id], old.0.bitPattern == z.meanX.bitPattern,
                old.1.bitPattern == z.meanY.bitPattern,
                old.2.map(\.bitPattern) == z.inverse.map(\.bitPattern), !old.3.isEmpty
            {
                z.wktPolygon = old.3
            } else {
                z.wktPolygon = ZOIPolygon.wkt(meanX: z.meanX, meanY: z.meanY, inverse: z.inverse)
            }
            var duration = 0
            var start = Double.infinity
            var end = -Double.infinity
            for v in w.visits {
                duration += v.duration
                start = min(start, v.arrival)
                end = max(end, v.departure)
            }
            z.duration = duration
            z.startTime = start
            z.endTime = end
            return z
        }
    }

    /// `updateCluster` (§2.6).
    static func update(_ z: inout ZoneOfInterest, px: Double, py: Double, f: Double, total: Double) {
        let c = z.inverse
        let h = f * (z.prior / total)
        z.age += 1
        z.accumulator += h
        let w = h / z.accumulator
        let e0 = px - z.meanX
        let e1 = py - z.meanY
        let d0 = w * e0
        let d1 = w * e1
        let m0 = d0 + z.meanX
        let m1 = d1 + z.meanY
        let f0 = px - m0
        let f1 = py - m1
        let k1 = w / libcPow(1 - w, 2)
        let n1 = outerProduct(f0, f1, c).map { k1 * $0 }
        let k2 = w / (1 - w)
        let n2 = (k2 * ZOIPolygon.quadratic(f0, f1, c)) + 1
        var cd = [Double](repeating: 0, count: 4)
        for i in 0..<4 { cd[i] = c[i] / (1 - w) - n1[i] / n2 }
        let n3 = outerProduct(d0, d1, cd)
        let t4 = 1 - ZOIPolygon.quadratic(d0, d1, cd)
        var updated = [Double](repeating: 0, count: 4)
        for i in 0..<4 { updated[i] = cd[i] + n3[i] / t4 }
        let dd1 = libcPow(1 - w, 2) * z.det
        let dd3 = (k2 * ZOIPolygon.quadratic(f0, f1, cd)) + 1
        let det = (1 - ZOIPolygon.quadratic(d0, d1, cd)) * (dd1 * dd3)
        z.meanX = m0
        z.meanY = m1
        if det > 0 {
            z.inverse = updated
            z.det = det
        }
    }

    /// `((M·xᵀ)·x)·M` for a 2×2 M and a row vector x, in Surge's order.
    @inline(__always) static func outerProduct(_ x0: Double, _ x1: Double, _ m: [Double]) -> [Double] {
        let mx0 = (0.0 + m[0] * x0) + m[1] * x1
        let mx1 = (0.0 + m[2] * x0) + m[3] * x1
        let o00 = 0.0 + mx0 * x0
        let o01 = 0.0 + mx0 * x1
        let o10 = 0.0 + mx1 * x0
        let o11 = 0.0 + mx1 * x1
        return [
            (0.0 + o00 * m[0]) + o01 * m[2], (0.0 + o00 * m[1]) + o01 * m[3],
            (0.0 + o10 * m[0]) + o11 * m[2], (0.0 + o10 * m[1]) + o11 * m[3],
        ]
    }

    /// §3 over every ZOI: weeks, durations and the (accumulating) weekly density, then the labels of the
    /// recurrent ones.
    static func classify(_ zois: inout [Working]) {
        for j in zois.indices {
            for v in zois[j].visits {
                zois[j].classificationDuration += v.duration
                zois[j].weeks.formUnion(ZOIQualifier.weeks(arrival: v.arrival, departure: v.departure))
                ZOIQualifier.addVisit(arrival: v.arrival, departure: v.departure, to: &zois[j].zoi.weeklyDensity)
            }
        }
        var allWeeks = Set<Int>()
        var totalTime = 0
        for w in zois {
            allWeeks.formUnion(w.weeks)
            totalTime += w.classificationDuration
        }
        let weekCount = Double(allWeeks.count)
        let ratios = zois.map { Double($0.weeks.count) / weekCount }
        let meanRatio = ZOIQualifier.mean(ratios)
        for j in zois.indices
        where ratios[j] >= meanRatio && Double(zois[j].classificationDuration) >= Double(totalTime) * 0.05 {
            zois[j].zoi.period = ZOIQualifier.label(zois[j].zoi.weeklyDensity)
        }
    }
}
