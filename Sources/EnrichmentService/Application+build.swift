import AsyncHTTPClient
import EnrichmentCore
import EnrichmentStorage
import EnrichmentUpstream
import Foundation
import Hummingbird
import Logging

/// The request context of the service.
public typealias ServiceContext = BasicRequestContext

/// Everything the handlers share.
struct ServiceState: Sendable {
    let configuration: ServiceConfiguration
    let enricher: Enricher
    let fixes: any FixStore
    let pois: any POIStore
    let index: PlacesIndex
    let metrics: ServiceMetrics
    let clock: any WallClock
}

/// Builds the service from its configuration; the executable and the tests both call this.
///
/// Opens (and migrates) the SQLite file, loads the bundled sample POIs into an empty database when enabled,
/// builds the in-memory places index, and wires the routes. `clock` is injected so tests control "now".
public func buildApplication(
    _ configuration: ServiceConfiguration,
    clock: any WallClock = SystemWallClock(),
    logger: Logger? = nil,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    var logger = logger ?? Logger(label: "enrichment-server")
    logger.logLevel = configuration.logLevel
    try configuration.validate()

    let database = try SQLiteDatabase(path: configuration.databasePath, durability: configuration.durability)
    // The service owns its SQLite file, so the last fix of each device can be served from memory.
    let fixStore = CachingFixStore(base: SQLiteFixStore(database: database))
    let poiStore = SQLitePOIStore(database: database)
    if configuration.loadSamplePOIs, try await poiStore.count() == 0 {
        let samples = try SamplePOIs.load()
        _ = try await poiStore.upsert(samples)
        logger.info("loaded bundled sample POIs", metadata: ["count": "\(samples.count)"])
    }
    let index = PlacesIndex(pois: try await poiStore.all())
    logger.info("places index ready", metadata: ["pois": "\(index.count)"])

    let places: (any PlacesProvider)? = switch configuration.places {
    case .local: LocalPlacesProvider(index: index)
    case .woosmap: WoosmapPlacesProvider(client: HTTPClient.shared, baseURL: configuration.woosmapBaseURL,
                                         apiKey: configuration.woosmapKey,
                                         timeout: .milliseconds(Int64(configuration.upstreamTimeout * 1000)))
    case .none: nil
    }
    let map: StaticMapBuilder? = configuration.mapEnabled
        ? try StaticMapBuilder(style: configuration.mapStyle, baseURL: configuration.mapBaseURL,
                               apiKey: configuration.mapKey, signingSecret: configuration.mapSigningSecret)
        : nil
    let template = try BodyTemplate(poi: configuration.bodyTemplate, location: configuration.locationTemplate)
    let settings = EnrichmentSettings(
        mode: configuration.mode,
        staleness: StalenessPolicy(window: configuration.stalenessWindow, maxFutureSkew: configuration.maxFutureSkew),
        fixMaxAge: configuration.fixMaxAge,
        placesQuery: PlacesQuery(limit: configuration.placesLimit, radius: configuration.placesRadius,
                                 filter: configuration.placesFilter),
        deadline: .milliseconds(Int64(configuration.deadline * 1000)))
    let enricher = Enricher(settings: settings, fixes: fixStore, places: places, map: map, template: template, clock: clock)
    let state = ServiceState(configuration: configuration, enricher: enricher, fixes: fixStore, pois: poiStore,
                             index: index, metrics: ServiceMetrics(), clock: clock)

    let router = buildRouter(state)
    let runningLogger = logger
    logger.info("configuration", metadata: ["settings": "\(configuration.redactedSummary)"])
    return Application(
        router: router,
        server: .guardedHTTP1(limits: configuration.connections, logger: logger),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port),
                             serverName: "enrichment-server"),
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? configuration.port
            runningLogger.notice("listening", metadata: ["address": "http://\(configuration.host):\(port)"])
            await onServerRunning(port)
        },
        logger: logger)
}

/// The routes of the service.
func buildRouter(_ state: ServiceState) -> Router<ServiceContext> {
    let router = Router(context: ServiceContext.self, options: .autoGenerateHeadEndpoints)
    let table = RouteTable()
    router.add(middleware: MetricsMiddleware(metrics: state.metrics))
    router.add(middleware: ErrorMiddleware(routes: table))
    if let apiKey = state.configuration.apiKey {
        router.add(middleware: AuthMiddleware(apiKey: apiKey))
    }
    let routes = RouteRecorder(router: router, table: table)
    OpsRoutes(state: state).register(on: routes)
    DeviceRoutes(state: state).register(on: routes)
    POIRoutes(state: state).register(on: routes)
    EnrichRoutes(state: state).register(on: routes)
    return router
}
