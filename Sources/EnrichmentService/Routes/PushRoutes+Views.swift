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

    func summary(_ report: PushReport) async throws -> PushSummary {
        PushSummary(
            report: report, confirmed: try await state.delivery.outbox.confirmedCount(pushId: report.push.id),
            now: state.clock.now().timeIntervalSince1970)
    }

    /// True when the push is the request's app's (its devices are stored under the app, `AppNamespace`).
    static func isVisible(_ push: PushDefinition) -> Bool {
        guard let first = push.deviceIds.first else { return AppScope.current.app == AppNamespace.defaultApp }
        return AppNamespace.app(of: first) == AppScope.current.app
    }

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

    struct ScheduledView: JSONObjectRepresentable {
        var push: PushDefinition
        var pending: Int
        var nextAt: Double

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("created_at", push.createdAt)
            object.field("devices", push.deviceIds.count)
            object.field("next_send_at", nextAt)
            object.field("pending", pending)
            object.field("plan", object: push.plan.map(PlanView.init))
            object.field("push_id", push.id)
        }
    }

    struct ScheduledList: JSONObjectRepresentable {
        var pushes: [ScheduledView]
        func writeJSON(into object: inout JSONObjectWriter) { object.field("pushes", objects: pushes) }
    }

    struct CancelledView: JSONObjectRepresentable {
        var pushId: String
        var cancelled: Int
        var sending: Int

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("cancelled", cancelled)
            object.field("push_id", pushId)
            // Deliveries a worker holds now go out (they may be on the wire); none else will.
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
            object.field("status_url", "/v1/push/\(receipt.push.id)")
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

    /// A push still under way: `{push_id, done: false, counts, deliveries, created_at}`.
    struct ProgressView: JSONObjectRepresentable {
        var push: PushDefinition
        var counts: [DeliveryState: Int]
        var summary: PushSummary? = nil
        var callback: CallbackView? = nil
        /// Why pending deliveries that were tried are still pending, grouped.
        var waiting: [WaitingView] = []

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("callback", object: callback)
            object.field("plan", object: push.plan.map(PlanView.init))
            object.field("summary", object: summary)
            object.field("waiting", objects: waiting)
            object.object("counts") { c in
                for state in DeliveryState.allCases { c.field(state.rawValue, counts[state] ?? 0) }
            }
            object.field("created_at", push.createdAt)
            object.field("deliveries", counts.values.reduce(0, +))
            object.field("done", false)
            object.field("push_id", push.id)
        }
    }

    /// `{push_id, done, counts, devices?: [{device_id, outcome, rule, deliveries: [...]}]}`.
    struct ReportView: JSONObjectRepresentable {
        var report: PushReport
        var withResults: Bool
        var summary: PushSummary? = nil
        var callback: CallbackView? = nil

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("callback", object: callback)
            object.field("plan", object: report.push.plan.map(PlanView.init))
            object.field("summary", object: summary)
            let counts = report.counts
            object.object("counts") { c in
                for state in DeliveryState.allCases { c.field(state.rawValue, counts[state] ?? 0) }
            }
            object.field("created_at", report.push.createdAt)
            object.field("deliveries", report.deliveries.count)
            if withResults {
                var byDevice: [String: [DeliveryReport]] = [:]
                for delivery in report.deliveries { byDevice[delivery.deviceId, default: []].append(delivery) }
                object.array("devices", report.devices) { device, d in
                    d.field("device_id", DeviceRoutes.shown(device.deviceId))
                    d.field("outcome", device.outcome ?? "pending")
                    d.field("rule", device.rule)
                    d.array("deliveries", byDevice[device.deviceId] ?? []) { delivery, o in
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
                }
            }
            object.field("done", report.isDone)
            object.field("push_id", report.push.id)
        }
    }
}
