public import Essentials

/// What became of the push's devices, counted per device (a device with two tokens counts once):
/// `matched` devices, those `held` by quiet hours (sent later), `capped`, `skipped` (by reason), `scheduled`
/// (due later), `sending` (due now), `accepted` by APNs (its 200: accepted, not yet shown), `failed`,
/// `expired`, `cancelled`, and `confirmed` by a receipt from the device (`POST /v1/receipts`).
///
/// Written from the counts the store keeps (`PushCounts`), so it costs the same at ten devices and at a million.
public struct PushSummary: JSONObjectRepresentable, Sendable {
    public var counts: PushCounts
    /// Devices whose send time quiet hours moved (the push's plan).
    public var held: Int

    public init(counts: PushCounts, held: Int) {
        self.counts = counts
        self.held = held
    }

    public init(status: PushStatus) {
        self.init(counts: status.counts, held: status.push.plan?.held ?? 0)
    }

    public func writeJSON(into object: inout JSONObjectWriter) {
        var skipped = counts.notSent
        let capped = skipped.removeValue(forKey: "capped") ?? 0
        let pending = counts.devices[.pending] ?? 0
        let scheduled = min(counts.scheduled, pending)
        object.field("accepted", counts.devices[.delivered] ?? 0)
        object.field("cancelled", counts.devices[.cancelled] ?? 0)
        object.field("capped", capped)
        object.field("confirmed", counts.confirmed)
        object.field("expired", counts.devices[.expired] ?? 0)
        object.field("failed", counts.devices[.failed] ?? 0)
        object.field("held", held)
        object.field("matched", counts.matched)
        object.field("scheduled", scheduled)
        object.field("sending", pending - scheduled)
        object.field("skipped", counts: skipped.filter { $0.value > 0 })
    }
}
