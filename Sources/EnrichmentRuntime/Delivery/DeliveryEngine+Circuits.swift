import APNsCore
import Delivery
import Essentials
import Foundation
import Logging

extension DeliveryEngine {
    /// True when APNs refused the credential itself (a revoked or wrong `.p8` key, a token it calls expired), not
    /// the way to it.
    static func refusesCredential(_ result: APNsSendResult) -> Bool {
        result.status == 403 && (result.reason == .invalidProviderToken || result.reason == .expiredProviderToken)
    }

    /// Why a result opened `environment`'s circuit, in a phrase for readiness and the log.
    func cause(of result: APNsSendResult, environment: SenderKey) -> String {
        if Self.refusesCredential(result) {
            let who = identities[environment.credential].map { " (\($0))" } ?? ""
            return "credential refused: 403 \(result.reason?.rawValue ?? "")\(who)"
        }
        if let transportError = result.transportError { return "unreachable: \(transportError)" }
        return "unreachable: HTTP \(result.status ?? 0) \(result.reason?.rawValue ?? "")"
    }

    /// Logs a circuit's change (the operator should know sending paused, why, and when it is back), and sets the
    /// metric. A refused credential is an `error` that names the credential, its team and key id: it will not mend
    /// by itself, unlike an unreachable APNs (a `warning`).
    func report(_ change: APNsCircuit.Change, environment: SenderKey, cause: APNsSendResult) {
        switch change {
        case .opened(let failures, let probeAt):
            observer?.circuit(environment: environment.description, state: APNsCircuit.State.open.rawValue)
            let wait = max(0, probeAt - clock.now().timeIntervalSince1970)
            var metadata: Logger.Metadata = [
                "environment": "\(environment)", "failures": "\(failures)",
                "next_probe_in": "\(String(format: "%.1f", wait)) s",
                "cause": "\(cause.transportError ?? "HTTP \(cause.status ?? 0) \(cause.reason?.rawValue ?? "")")",
            ]
            if Self.refusesCredential(cause) {
                metadata["credential"] = "\(environment.credential)"
                if let identity = identities[environment.credential] { metadata["identity"] = "\(identity)" }
                let reason = cause.reason?.rawValue ?? ""
                let message: Logger.Message =
                    failures == 1
                    ? "APNs refused the credential (\(reason)): sending with it paused, deliveries wait (no attempt used); check the key is not revoked and its key id and team id match it"
                    : "APNs still refuses the credential: the probe failed, sending with it stays paused"
                logger.error(message, metadata: metadata)
            } else {
                logger.warning(
                    failures == 1
                        ? "APNs unreachable: sending paused, deliveries wait (no attempt used)"
                        : "APNs still unreachable: the probe failed, sending stays paused",
                    metadata: metadata)
            }
        case .closed(let outage):
            observer?.circuit(environment: environment.description, state: APNsCircuit.State.closed.rawValue)
            logger.warning(
                "APNs reachable again: sending resumed",
                metadata: [
                    "environment": "\(environment)", "outage": "\(String(format: "%.1f", outage)) s",
                ])
        }
    }
}
