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

    func register(on router: RouteRecorder) {
        router.get("/health") { _, _ in
            JSONIO.response(
                Health(
                    pois: state.index.count, places: state.configuration.places.rawValue,
                    mode: state.configuration.mode.rawValue))
        }
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: state.metrics.exposition())))
        }
    }
}
