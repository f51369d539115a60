import Delivery
import Essentials

extension PushRoutes {
    /// Pending deliveries that were tried, grouped by why they still wait: `{status?, reason?, error?,
    /// deliveries}`, the largest group first. Answers "why is my push still pending?" while it is (a refused
    /// credential: 403 `InvalidProviderToken`; an unreachable APNs; a 429 waiting its retry).
    struct WaitingView: JSONObjectRepresentable {
        var status: Int?
        var reason: String?
        var error: String?
        var deliveries: Int

        /// The groups of `deliveries`' pending ones that carry a status, reason or error (at most 20 groups).
        static func groups(of deliveries: [DeliveryReport]) -> [WaitingView] {
            struct Key: Hashable {
                var status: Int?
                var reason: String?
                var error: String?
            }
            var counts: [Key: Int] = [:]
            for delivery in deliveries where delivery.state == .pending {
                guard delivery.status != nil || delivery.reason != nil || delivery.error != nil else { continue }
                counts[Key(status: delivery.status, reason: delivery.reason, error: delivery.error), default: 0] += 1
            }
            return counts.sorted { $0.value != $1.value ? $0.value > $1.value : "\($0.key)" < "\($1.key)" }
                .prefix(20)
                .map {
                    WaitingView(status: $0.key.status, reason: $0.key.reason, error: $0.key.error, deliveries: $0.value)
                }
        }

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("deliveries", deliveries)
            object.field("error", error)
            object.field("reason", reason)
            object.field("status", status.map { Int64($0) })
        }
    }
}
