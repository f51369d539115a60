import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird

extension PushRoutes {
    /// The push's timing as asked (`send_at`, `local_time`, `quiet_hours`, `cap`) and its first and last send times.
    struct PlanView: JSONObjectRepresentable {
        var plan: PushPlan

        func writeJSON(into object: inout JSONObjectWriter) {
            if case .object(let members) = plan.stored {
                for key in members.keys.sorted() where key != "held" { object.field(key, json: members[key]) }
            }
        }
    }

    /// True when the push is the request's app's.
    static func isVisible(_ push: PushDefinition) -> Bool { push.app == AppScope.current.app }

    /// Where the push's callback stands: `{url, state, attempts, last_outcome, last_attempt_at, next_attempt_at}`.
    struct CallbackView: JSONObjectRepresentable {
        var status: PushCallbackStatus

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("attempts", status.attempts)
            object.field("last_attempt_at", status.lastAttemptAt)
            object.field("last_outcome", status.outcome)
            object.field("next_attempt_at", status.nextAttemptAt)
            object.field("state", status.state)
            object.field("url", status.url)
        }
    }

    /// The figures every view of a push carries: `counts` (deliveries by state; `platforms` splits them into
    /// `android` and `ios` once the push has an Android delivery), `deliveries`, `summary` (its
    /// `matched` is the devices), `plan`, `rate` and `ends_at` (a paced push), `resolving` (and `open`: devices are still added by
    /// requests), `cancelled_at`.
    static func writeFigures(_ status: PushStatus, into object: inout JSONObjectWriter) {
        object.field("cancelled_at", status.cancelledAt)
        object.object("counts") { c in
            for state in DeliveryState.allCases { c.field(state.rawValue, status.counts.deliveries[state] ?? 0) }
        }
        object.field("created_at", status.push.createdAt)
        object.field("deliveries", status.counts.total)
        object.field("deliveries_url", "/v1/push/\(status.push.id)/deliveries")
        object.field("ends_at", status.endsAt)
        object.field("plan", object: status.push.plan.map(PlanView.init))
        // Per platform, once the push has an Android delivery (a push to iPhones only reads as before).
        if status.counts.androidDeliveries.values.contains(where: { $0 != 0 }) {
            object.object("platforms") { platforms in
                for (name, counts) in [
                    ("android", status.counts.androidDeliveries), ("ios", status.counts.iosDeliveries),
                ] {
                    platforms.object(name) { c in
                        for state in DeliveryState.allCases { c.field(state.rawValue, counts[state] ?? 0) }
                    }
                }
            }
        }
        if status.open { object.field("open", true) }
        object.field("push_id", status.push.id)
        object.field("rate", status.push.rate)
        object.field("resolving", status.resolving)
        object.field("summary", object: PushSummary(status: status))
    }

    /// One push of `GET /v1/push`.
    struct ListedPushView: JSONObjectRepresentable {
        var status: PushStatus
        var nextAt: Double?

        func writeJSON(into object: inout JSONObjectWriter) {
            PushRoutes.writeFigures(status, into: &object)
            object.field("done", status.isDone)
            object.field("next_send_at", nextAt)
            object.field("pending", status.counts.pending)
        }
    }

    struct PushListView: JSONObjectRepresentable {
        var pushes: [ListedPushView]
        /// The cursor of the next page (nil: this is the last).
        var next: String?

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("next_cursor", next)
            object.field("pushes", objects: pushes)
        }
    }

    /// `POST /v1/push/{id}/cancel`: how many deliveries the cancel stopped, how many were sent before it.
    struct CancelledView: JSONObjectRepresentable {
        var status: PushStatus
        /// Deliveries claimed before the cancel and still not recorded after the answer's wait (they may go out).
        var sending: Int

        func writeJSON(into object: inout JSONObjectWriter) {
            let counts = status.counts.deliveries
            // Every pending delivery not on its way is cancelled (now, or by the background sweep).
            object.field("cancelled", (counts[.cancelled] ?? 0) + max(0, status.counts.pending - sending))
            object.field("cancelled_at", status.cancelledAt)
            object.object("counts") { c in
                for state in DeliveryState.allCases { c.field(state.rawValue, counts[state] ?? 0) }
            }
            object.field("push_id", status.push.id)
            // Accepted or refused by APNs before the cancel.
            object.field("sent", (counts[.delivered] ?? 0) + (counts[.failed] ?? 0))
            // Deliveries a worker held at the cancel and had not recorded 1 s later: they may still go out.
            object.field("still_sending", sending)
        }
    }

    struct ReceiptView: JSONObjectRepresentable {
        var pushId: String
        var deviceId: String
        var new: Bool

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("already_confirmed", !new)
            object.field("confirmed", true)
            object.field("device_id", deviceId)
            object.field("push_id", pushId)
        }
    }

    struct AcceptedView: JSONObjectRepresentable {
        var receipt: DeliveryEngine.Receipt

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("deliveries", receipt.deliveries)
            object.field("devices", receipt.push.deviceIds.count)
            object.field("not_sent", objects: receipt.notSent.map(OutcomeView.init))
            object.field("push_id", receipt.push.id)
            object.field("rate", receipt.push.rate)
            object.field("status_url", "/v1/push/\(receipt.push.id)")
        }
    }

    /// An audience push whose resolution goes on in the background.
    struct ResolvingView: JSONObjectRepresentable {
        var push: PushDefinition

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("push_id", push.id)
            object.field("rate", push.rate)
            object.field("resolving", true)
            object.field("status_url", "/v1/push/\(push.id)")
        }
    }

    /// An audience push resolved before the answer, not waited for.
    struct ResolvedAcceptedView: JSONObjectRepresentable {
        var status: PushStatus

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("deliveries", status.counts.total)
            object.field("devices", status.counts.matched)
            object.field("push_id", status.push.id)
            object.field("rate", status.push.rate)
            object.field("resolving", false)
            object.field("status_url", "/v1/push/\(status.push.id)")
            object.field("summary", object: PushSummary(status: status))
        }
    }

    struct OutcomeView: JSONObjectRepresentable {
        var outcome: DeviceOutcome

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("device_id", DeviceRoutes.shown(outcome.deviceId))
            object.field("outcome", outcome.outcome)
            object.field("rule", outcome.rule)
        }
    }

    /// A push still under way (resolving, or deliveries pending): its figures and why pending ones wait.
    struct ProgressView: JSONObjectRepresentable {
        var status: PushStatus
        var callback: CallbackView? = nil
        /// Why pending deliveries that were tried are still pending, grouped.
        var waiting: [WaitingView] = []

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("callback", object: callback)
            object.field("waiting", objects: waiting)
            PushRoutes.writeFigures(status, into: &object)
            object.field("done", false)
        }
    }

    /// A done push: its figures and, for a push of up to `resultsLimit` devices, each device's results
    /// (`devices: [{device_id, outcome, rule, deliveries: [...]}]`).
    struct ReportView: JSONObjectRepresentable {
        var status: PushStatus
        var report: PushReport?
        var callback: CallbackView? = nil

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("callback", object: callback)
            PushRoutes.writeFigures(status, into: &object)
            if let report {
                var byDevice: [String: [DeliveryReport]] = [:]
                for delivery in report.deliveries { byDevice[delivery.deviceId, default: []].append(delivery) }
                object.array("devices", report.devices) { device, d in
                    d.field("device_id", DeviceRoutes.shown(device.deviceId))
                    d.field("outcome", device.outcome ?? "pending")
                    d.field("rule", device.rule)
                    d.array("deliveries", byDevice[device.deviceId] ?? []) { delivery, o in
                        DeliveryPageView.write(delivery, into: &o)
                    }
                }
            }
            object.field("done", status.isDone)
        }
    }

    /// `GET /v1/push/{id}/deliveries`: a page of deliveries, in the order they were made.
    struct DeliveryPageView: JSONObjectRepresentable {
        var pushId: String
        var deliveries: [ListedDelivery]
        var next: String?

        static func write(_ delivery: DeliveryReport, into o: inout JSONObjectWriter) {
            o.field("apns_id", delivery.apnsId)
            o.field("attempts", delivery.attempts)
            o.field("environment", delivery.environment.rawValue)
            o.field("error", delivery.error)
            o.field("reason", delivery.reason)
            o.field("resent_after_takeover", delivery.resentAfterTakeover)
            o.field("state", delivery.state.rawValue)
            o.field("status", delivery.status.map(Int64.init))
            o.field("timestamp", delivery.apnsTimestamp)
            o.field("token", delivery.token)
        }

        func writeJSON(into object: inout JSONObjectWriter) {
            object.array("deliveries", deliveries) { listed, o in
                o.field("device_id", DeviceRoutes.shown(listed.report.deviceId))
                o.field("outcome", listed.outcome)
                o.field("rule", listed.rule)
                o.field("scheduled_at", listed.report.scheduledAt)
                Self.write(listed.report, into: &o)
            }
            object.field("next_cursor", next)
            object.field("push_id", pushId)
        }
    }
}
