public import Essentials

/// What became of the push's devices, counted per device (a device with two tokens counts once):
/// `matched` devices, those `held` by quiet hours (sent later), `capped`, `skipped` (by reason), `scheduled`
/// (due later), `sending` (due now), `accepted` by APNs (its 200: accepted, not yet shown), `failed`,
/// `expired`, `cancelled`, and `confirmed` by a receipt from the device (`POST /v1/receipts`).
public struct PushSummary: JSONObjectRepresentable, Sendable {
    public var report: PushReport
    public var confirmed: Int
    public var now: Double

    public init(report: PushReport, confirmed: Int, now: Double) {
        self.report = report
        self.confirmed = confirmed
        self.now = now
    }

    public func writeJSON(into object: inout JSONObjectWriter) {
        var byDevice: [String: [DeliveryReport]] = Dictionary(minimumCapacity: report.devices.count)
        for delivery in report.deliveries { byDevice[delivery.deviceId, default: []].append(delivery) }
        var skipped: [String: Int] = [:]
        var capped = 0
        for device in report.devices where byDevice[device.deviceId] == nil {
            if device.rule == "capped" { capped += 1 } else { skipped[device.rule ?? "unknown", default: 0] += 1 }
        }
        var counts: [String: Int] = [:]
        for deliveries in byDevice.values {
            let states = Set(deliveries.map(\.state))
            let state: String =
                if states.contains(.delivered) { "accepted" } else if states.contains(.pending) {
                    deliveries.contains { ($0.scheduledAt ?? 0) > now && $0.attempts == 0 }
                        ? "scheduled" : "sending"
                } else if states.contains(.failed) { "failed" } else if states.contains(.expired) { "expired" } else {
                    "cancelled"
                }
            counts[state, default: 0] += 1
        }
        object.field("accepted", counts["accepted"] ?? 0)
        object.field("cancelled", counts["cancelled"] ?? 0)
        object.field("capped", capped)
        object.field("confirmed", confirmed)
        object.field("expired", counts["expired"] ?? 0)
        object.field("failed", counts["failed"] ?? 0)
        object.field("held", report.push.plan?.held ?? 0)
        object.field("matched", report.push.deviceIds.count)
        object.field("scheduled", counts["scheduled"] ?? 0)
        object.field("sending", counts["sending"] ?? 0)
        object.field("skipped", counts: skipped)
    }
}
