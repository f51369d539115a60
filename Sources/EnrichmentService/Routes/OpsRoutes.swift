import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Hummingbird
import NIOCore

/// `/health` and `/metrics`.
struct OpsRoutes {
    let state: ServiceState

    struct Health: JSONObjectRepresentable {
        var status = "ok"
        var pois: Int
        var places: String
        var mode: String

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("mode", mode)
            object.field("places", places)
            object.field("pois", pois)
            object.field("status", status)
        }
    }

    struct LiveView: JSONObjectRepresentable {
        func writeJSON(into object: inout JSONObjectWriter) { object.field("status", "ok") }
    }

    /// `{"status": "ready"|"not_ready", "reason"?, "problem"?, "checks": {...}, "apns": {"sandbox": "closed"},
    /// "apns_causes"?: {"sandbox": "credential refused: 403 InvalidProviderToken (team ..., key ...)"}}`.
    struct ReadyView: JSONObjectRepresentable {
        var storage: StorageHealth
        var pois: Int
        /// Nil once the places index is in.
        var placesProblem: String?
        var apns: [String: String]
        /// Why each APNs circuit that is not closed opened (a refused credential, an unreachable APNs).
        var apnsCauses: [String: String] = [:]

        var problem: String? { storage.problem ?? placesProblem }
        var reason: String? { storage.problem != nil ? storage.reason : placesProblem.map { _ in "places_loading" } }

        func writeJSON(into object: inout JSONObjectWriter) {
            object.object("apns") { a in
                for (environment, circuit) in apns.sorted(by: { $0.key < $1.key }) { a.field(environment, circuit) }
            }
            if !apnsCauses.isEmpty {
                object.object("apns_causes") { a in
                    for (environment, cause) in apnsCauses.sorted(by: { $0.key < $1.key }) {
                        a.field(environment, cause)
                    }
                }
            }
            object.object("checks") { c in
                c.field("database", storage.problem ?? "ok")
                c.field("places_index", placesProblem ?? "ok (\(pois) POIs)")
            }
            if let problem { object.field("problem", problem) }
            if let reason { object.field("reason", reason) }
            object.field("status", problem == nil ? "ready" : "not_ready")
        }
    }

    func register(on router: RouteRecorder) {
        router.get("/health") { _, _ in
            JSONIO.response(
                Health(
                    pois: state.index.count, places: state.configuration.places.rawValue,
                    mode: state.configuration.mode.rawValue))
        }
        // Liveness: the process answers (never the database's fault: a restart would not help).
        router.get("/health/live") { _, _ in
            JSONIO.response(LiveView())
        }
        // Readiness: the database reachable and writable, its disk not full, the places index loaded. APNs is
        // reported but never makes a node unready: every node shares the same APNs.
        router.get("/health/ready") { _, _ in
            // Its own short bound (ENRICH_READY_TIMEOUT), not the requests' (issue 47): a probe gives up after 1 s
            // by default and must see an answer, not a hang, whatever the database does.
            let storage = await state.storageHealth.check(
                within: .milliseconds(Int64(state.configuration.readyTimeout * 1000)))
            let view = ReadyView(
                storage: storage, pois: state.index.count, placesProblem: state.placesLoading.problem,
                apns: state.delivery.circuitStates, apnsCauses: state.delivery.circuitCauses)
            return JSONIO.response(view, status: view.problem == nil ? .ok : .serviceUnavailable)
        }
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: state.metrics.exposition())))
        }
    }
}
