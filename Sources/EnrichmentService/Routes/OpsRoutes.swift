import Hummingbird

/// `/health` and `/metrics`.
struct OpsRoutes {
    let state: ServiceState

    struct Health: Encodable {
        var status = "ok"
        var pois: Int
        var places: String
        var mode: String
    }

    func register(on router: RouteRecorder) {
        router.get("/health") { _, _ in
            try JSONIO.response(Health(pois: state.index.count, places: state.configuration.places.rawValue,
                                       mode: state.configuration.mode.rawValue))
        }
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(string: state.metrics.exposition())))
        }
    }
}
