import Delivery
import EnrichmentCore
public import EnrichmentRuntime
public import Essentials
import Foundation
public import Hummingbird
public import Logging
import NIOCore
public import ServiceLifecycle

/// The request context of the service.
public typealias ServiceContext = BasicRequestContext

/// Everything the handlers share: the engine's parts (stored, so a request reads them without copying the
/// runtime or the configuration), and what only the HTTP layer has.
struct ServiceState: Sendable {
    let configuration: ServiceConfiguration
    let maxBodyBytes: Int
    let enricher: Enricher
    let fixes: any FixStore
    let pois: any POIStore
    let index: PlacesIndex
    let importer: POIImporter
    let clock: any WallClock
    let metrics: ServiceMetrics
    let tokens: any DeviceTokenStore
    let activities: any ActivityStore
    let channels: BroadcastChannels
    let delivery: DeliveryEngine
    let location: LocationEngine
    let storageHealth: StorageHealthCheck
    let placesLoading: PlacesLoading
    let keys: APIKeyRing
    let appEnrichers: [String: Enricher]
    /// Fix reports, stored and evaluated in batches.
    let intake: FixIntake

    /// The enricher for a device (by its stored key): its app's own settings, else the service's.
    func enricher(forDevice key: String) -> Enricher {
        AppNamespace.pick(key, base: enricher, byApp: appEnrichers)
    }

    init(runtime: EnrichmentRuntime, metrics: ServiceMetrics, logger: Logger = Logger(label: "enrichment-server")) {
        placesLoading = runtime.placesLoading
        configuration = runtime.configuration
        maxBodyBytes = runtime.configuration.maxBodyBytes
        enricher = runtime.enricher
        fixes = runtime.fixes
        pois = runtime.pois
        index = runtime.index
        importer = runtime.importer
        clock = runtime.clock
        tokens = runtime.tokens
        activities = runtime.activities
        channels = runtime.channels
        delivery = runtime.delivery
        location = runtime.location
        storageHealth = runtime.storageHealth
        keys = APIKeyRing(configuration: runtime.configuration)
        appEnrichers = runtime.appEnrichers
        self.metrics = metrics
        // With PostgreSQL a batch's database work has the requests' bound (`DatabaseDeadlineMiddleware`).
        intake = FixIntake(
            fixes: runtime.fixes, location: runtime.location, spans: runtime.enricher.spans,
            timeout: runtime.configuration.databaseURL == nil
                ? nil : .milliseconds(Int64(runtime.configuration.databaseConnectTimeout * 1000)),
            logger: logger)
        // Audiences are resolved by the delivery engine in the background, with the places and regions the
        // service knows.
        let state = self
        runtime.delivery.resolveAudiences { audience, app, now in
            try await AudienceRoutes.members(audience, app: app, now: now, state: state)
        }
    }
}

/// Builds the service from its configuration; the executable and the tests both call this.
///
/// Opens the engine (`EnrichmentRuntime`: database, stores, places index, enricher) and wires the routes over it. `clock` is injected so tests control "now".
public func buildApplication(
    _ configuration: ServiceConfiguration,
    clock: any WallClock = SystemWallClock(),
    logger: Logger? = nil,
    additionalServices: [any Service] = [],
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    var logger = logger ?? Logger(label: "enrichment-server")
    logger.logLevel = configuration.logLevel
    let metrics = ServiceMetrics()
    let runtime = try await EnrichmentRuntime.open(
        configuration, clock: clock, logger: logger, deliveryObserver: metrics, placesInBackground: true)
    try APIKeyRing.check(runtime.configuration)
    let state = ServiceState(runtime: runtime, metrics: metrics, logger: logger)

    let router = buildRouter(state)
    let serverName = "enrichment-server"
    let answerer = EnrichAnswerer(state: state, serverName: serverName, enabled: configuration.enrichOnEventLoop)
    let runningLogger = logger
    logger.info("configuration", metadata: ["settings": "\(configuration.redactedSummary)"])
    return Application(
        router: router,
        server: .guardedHTTP1(limits: configuration.connections, enrich: answerer, logger: logger),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: serverName),
        // Listed before the server, so on graceful shutdown the server stops first and the workers then finish.
        services: [EngineService(runtime: runtime)] + additionalServices,
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? configuration.port
            runningLogger.notice("listening", metadata: ["address": "http://\(configuration.host):\(port)"])
            await onServerRunning(port)
        },
        logger: logger)
}

/// The routes of the service.
func buildRouter(_ state: ServiceState, table: RouteTable = RouteTable()) -> Router<ServiceContext> {
    let router = Router(context: ServiceContext.self, options: .autoGenerateHeadEndpoints)
    // A server span per request when a tracer is set up (ENRICH_OTLP_ENDPOINT); the engine's spans are its children.
    // With tracing on (a tracer was set up): a server span per request. The store search's API keys (`private_key`,
    // `key`) never reach a span.
    if state.enricher.spans.tracer != nil {
        router.add(middleware: TracingMiddleware(redactingQueryParameters: ["private_key", "key"]))
    }
    // One line per request at debug (method, path without its query, status), inside the request's span: with
    // tracing on it carries the trace id.
    if state.configuration.logLevel <= .debug { router.add(middleware: RequestLogMiddleware()) }
    router.add(middleware: MetricsMiddleware(metrics: state.metrics))
    router.add(middleware: ErrorMiddleware(routes: table))
    router.add(middleware: PlacesLoadingMiddleware(loading: state.placesLoading, wait: .seconds(10)))
    if state.configuration.databaseURL != nil {
        router.add(
            middleware: DatabaseDeadlineMiddleware(
                timeout: .milliseconds(Int64(state.configuration.databaseConnectTimeout * 1000)),
                pushWait: .milliseconds(Int64(state.configuration.delivery.waitTimeout * 1000))))
    }
    let clock = state.clock
    router.add(middleware: AuthMiddleware(keys: state.keys, now: { clock.now().timeIntervalSince1970 }))
    let routes = RouteRecorder(router: router, table: table)
    OpsRoutes(state: state).register(on: routes)
    DeviceRoutes(state: state).register(on: routes)
    POIRoutes(state: state).register(on: routes)
    EnrichRoutes(state: state).register(on: routes)
    TokenRoutes(state: state).register(on: routes)
    FCMTokenRoutes(state: state).register(on: routes)
    ActivityRoutes(state: state).register(on: routes)
    ChannelRoutes(state: state).register(on: routes)
    PushRoutes(state: state).register(on: routes)
    LocationRoutes(state: state).register(on: routes)
    AudienceRoutes(state: state).register(on: routes)
    PreviewRoutes(state: state).register(on: routes)
    return router
}

/// Runs the engine's background work beside the server: the delivery workers (graceful shutdown stops new
/// pushes, finishes the claimed ones and leaves the rest committed for the next start) and, with PostgreSQL, the
/// places index following other nodes' imports.
struct EngineService: Service {
    let runtime: EnrichmentRuntime

    func run() async throws {
        let runtime = self.runtime
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await runtime.runBackgroundWork() }
            let engine = runtime.delivery
            if engine.isConfigured {
                await withGracefulShutdownHandler {
                    // Pushes are enriched as they are sent: not before the places index is in.
                    while !Task.isCancelled, await !runtime.placesLoading.wait(timeout: .seconds(60)) {}
                    await engine.run()
                    await runtime.channels.shutdown()
                } onGracefulShutdown: {
                    engine.beginShutdown()
                }
            } else {
                // Nothing to send: stay up with the server (a service that returns would stop the group).
                try? await gracefulShutdown()
            }
            group.cancelAll()
        }
    }
}

/// A start-up failure as a sentence that says what to do, for the errors an operator meets first (the address is
/// taken, not allowed, or not on this machine); nil for any other error.
public func startupProblem(_ error: any Error, configuration: ServiceConfiguration) -> String? {
    guard let io = error as? IOError else { return nil }
    let address = "\(configuration.host):\(configuration.port)"
    switch io.errnoCode {
    case EADDRINUSE:
        return "cannot listen on \(address): the address is already in use (another enrichment-server, or another "
            + "program, is listening there); choose another port with --port or ENRICH_PORT (0 picks a free one)"
    case EACCES:
        return "cannot listen on \(address): permission denied (ports below 1024 need privileges); choose another "
            + "port with --port or ENRICH_PORT"
    case EADDRNOTAVAIL:
        return "cannot listen on \(address): no interface of this machine has that address; choose another with "
            + "--host or ENRICH_HOST (127.0.0.1 for this machine only, 0.0.0.0 for every interface)"
    default:
        return nil
    }
}
