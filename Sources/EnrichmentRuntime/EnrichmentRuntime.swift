import AsyncHTTPClient
public import Delivery
public import EnrichmentCore
public import EnrichmentPostgres
import EnrichmentStorage
import EnrichmentUpstream
public import Essentials
import LocationCore
public import Logging

/// The engine, wired once from a configuration: the one composition root of the project.
///
/// The service, `enrichment-server import-pois`, `push-sender simulate` (in-process) and `places-bench` all build
/// their engine here, so each honours every `ENRICH_*` setting the same way. New stores, caches and workers are
/// added here once; the HTTP layer only adds routes over a runtime.
public struct EnrichmentRuntime: Sendable {
    /// How much of the engine to open.
    public enum Scope: Sendable {
        /// Everything: stores, sample POIs when the table is empty, the in-memory places index, the enricher.
        case full
        /// The database and stores only (bulk imports: no index to build, no sample POIs).
        case storage
        /// The stores and an enricher whose local places search reads the POI store (no index to build): one-off
        /// enrichments such as `push-sender simulate` in process.
        case query
    }

    public let configuration: ServiceConfiguration
    /// The PostgreSQL pool when `ENRICH_DATABASE_URL` is set (nil with the embedded SQLite file).
    public let postgres: PostgresBackend?
    /// The last-fix store the engine reads. SQLite: behind an in-memory last-fix cache (this process owns the
    /// file). PostgreSQL: read through, so a fix reported to any node is the next enrichment's on every node.
    public let fixes: any FixStore
    public let pois: any POIStore
    /// The in-memory places index (empty in `.storage` scope).
    public let index: PlacesIndex
    /// The places search the enricher uses; nil when places are off.
    public let places: (any PlacesProvider)?
    public let map: StaticMapBuilder?
    public let template: BodyTemplate
    public let enricher: Enricher
    /// Writes POIs to the store, then to the index.
    public let importer: POIImporter
    public let clock: any WallClock
    /// Device token registrations.
    public let tokens: any DeviceTokenStore
    /// Pushes and their deliveries.
    public let outbox: any OutboxStore
    /// Enrich-and-send over the outbox (its workers run only when started: `delivery.run()`).
    public let delivery: DeliveryEngine
    /// With PostgreSQL: follows the POIs other nodes import into this node's index (runs in `runBackgroundWork`).
    public let placesFollower: PlacesIndexFollower?
    /// Visits, zones of interest, regions and their events.
    public let location: LocationEngine

    /// What the engine does in the background until cancelled: following other nodes' POI imports and regions
    /// (PostgreSQL), the daily location retention, the location webhook. Delivery has its own `delivery.run()`,
    /// stopped gracefully.
    public func runBackgroundWork() async {
        await withTaskGroup(of: Void.self) { group in
            if let placesFollower { group.addTask { await placesFollower.run() } }
            group.addTask { await location.runBackgroundWork(followRegions: postgres != nil) }
        }
    }

    /// Opens (and migrates) the database and wires the engine; `clock` is injected so tests control "now".
    /// Logs nothing unless given a logger (command-line tools keep their standard output clean).
    public static func open(
        _ configuration: ServiceConfiguration, scope: Scope = .full, clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "enrichment-runtime", factory: { _ in SwiftLogNoOpLogHandler() }),
        deliveryObserver: (any DeliveryObserver)? = nil
    ) async throws -> EnrichmentRuntime {
        try configuration.validate()
        let fixes: any FixStore
        let pois: any POIStore
        let tokens: any DeviceTokenStore
        let outbox: any OutboxStore
        let locationStore: any LocationStore
        let postgres: PostgresBackend?
        if let url = configuration.databaseURL {
            var settings = try PostgresSettings(url: url.exposed)
            settings.maximumConnections = configuration.databasePoolSize
            settings.connectTimeout = .milliseconds(Int64(configuration.databaseConnectTimeout * 1000))
            let backend = try await PostgresBackend(settings: settings, logger: logger)
            logger.info("using PostgreSQL", metadata: ["database": "\(settings)"])
            postgres = backend
            fixes = PostgresFixStore(database: backend)
            pois = PostgresPOIStore(database: backend)
            tokens = PostgresTokenStore(database: backend)
            outbox = PostgresOutbox(database: backend)
            locationStore = PostgresLocationStore(database: backend)
        } else {
            let database = try SQLiteDatabase(path: configuration.databasePath, durability: configuration.durability)
            postgres = nil
            fixes = CachingFixStore(base: SQLiteFixStore(database: database))
            pois = SQLitePOIStore(database: database)
            tokens = SQLiteTokenStore(database: database)
            outbox = SQLiteOutbox(database: database)
            locationStore = SQLiteLocationStore(database: database)
        }
        let index: PlacesIndex
        // The POI version before the index is read: changes after it are applied again (an upsert), none is missed.
        let startVersion = try await (pois as? PostgresPOIStore)?.currentVersion()
        if scope == .full {
            if configuration.loadSamplePOIs, try await pois.count() == 0 {
                let samples = try SamplePOIs.load()
                _ = try await pois.upsert(samples)
                logger.info("loaded bundled sample POIs", metadata: ["count": "\(samples.count)"])
            }
            index = PlacesIndex(pois: try await pois.all())
            logger.info("places index ready", metadata: ["pois": "\(index.count)"])
        } else {
            index = PlacesIndex()
        }
        let places: (any PlacesProvider)? =
            switch configuration.places {
            case .local: scope == .query ? StoredPlacesProvider(store: pois) : LocalPlacesProvider(index: index)
            case .woosmap:
                WoosmapPlacesProvider(
                    client: HTTPClient.shared, baseURL: configuration.woosmapBaseURL, apiKey: configuration.woosmapKey,
                    timeout: .milliseconds(Int64(configuration.upstreamTimeout * 1000)))
            case .none: nil
            }
        let map: StaticMapBuilder? =
            configuration.mapEnabled
            ? try StaticMapBuilder(
                style: configuration.mapStyle, baseURL: configuration.mapBaseURL, apiKey: configuration.mapKey,
                signingSecret: configuration.mapSigningSecret)
            : nil
        let template = try BodyTemplate(poi: configuration.bodyTemplate, location: configuration.locationTemplate)
        // This process owns a SQLite file, so its own evaluations keep the contexts current; with PostgreSQL other
        // nodes evaluate too, so a context is read again after a second.
        let contexts = DeviceContexts(store: locationStore, ttl: postgres == nil ? .seconds(86_400 * 365) : .seconds(1))
        let enricher = Enricher(
            settings: configuration.enrichmentSettings, fixes: fixes, places: places, map: map, template: template,
            clock: clock, contexts: contexts)
        let delivery = DeliveryEngine(
            tokens: tokens, outbox: outbox, settings: configuration.delivery, enricher: enricher,
            senders: scope == .full ? try configuration.delivery.makeSenders() : [:], clock: clock, logger: logger,
            observer: deliveryObserver, exclusiveStore: postgres == nil)
        let location = try await LocationEngine(
            store: locationStore, fixes: fixes, settings: configuration.location,
            index: configuration.places == .local ? index : nil, webhookURL: configuration.locationWebhookURL,
            delivery: delivery, contexts: contexts, clock: clock, logger: logger)
        return EnrichmentRuntime(
            configuration: configuration, postgres: postgres, fixes: fixes, pois: pois, index: index, places: places,
            map: map, template: template, enricher: enricher,
            importer: POIImporter(store: pois, index: scope == .full ? index : nil), clock: clock, tokens: tokens,
            outbox: outbox, delivery: delivery,
            placesFollower: scope == .full
                ? (pois as? PostgresPOIStore).map {
                    PlacesIndexFollower(store: $0, index: index, from: startVersion ?? 0, logger: logger)
                } : nil, location: location)
    }
}

extension ServiceConfiguration {
    /// The enricher's settings (mode, staleness rule, fix age, places query, deadline).
    public var enrichmentSettings: EnrichmentSettings {
        EnrichmentSettings(
            mode: mode, staleness: StalenessPolicy(window: stalenessWindow, maxFutureSkew: maxFutureSkew),
            fixMaxAge: fixMaxAge,
            placesQuery: PlacesQuery(limit: placesLimit, radius: placesRadius, filter: placesFilter),
            deadline: .milliseconds(Int64(deadline * 1000)))
    }
}

/// Writes POIs to the store (source of truth) and then to the in-memory index.
public struct POIImporter: Sendable {
    let store: any POIStore
    let index: PlacesIndex?

    /// `index` is the running engine's in-memory index; nil when only the database is being filled.
    public init(store: any POIStore, index: PlacesIndex?) {
        self.store = store
        self.index = index
    }

    /// Upserts every POI in one transaction (all or nothing), then publishes them to the in-memory index.
    public func importPOIs(_ pois: [POI]) async throws {
        _ = try await store.upsert(pois)
        index?.upsert(pois)
    }

    /// Removes POIs from the store, then from the in-memory index; returns how many were stored.
    public func deletePOIs(storeIds: [String]) async throws -> Int {
        let removed = try await store.delete(storeIds: storeIds)
        index?.remove(storeIds)
        return removed
    }
}

/// Applies the POIs other nodes import to this node's in-memory index, incrementally, within `interval`.
public struct PlacesIndexFollower: Sendable {
    let store: PostgresPOIStore
    let index: PlacesIndex
    let start: Int64
    let interval: Duration
    let logger: Logger

    init(
        store: PostgresPOIStore, index: PlacesIndex, from start: Int64, interval: Duration = .milliseconds(250),
        logger: Logger
    ) {
        self.store = store
        self.index = index
        self.start = start
        self.interval = interval
        self.logger = logger
    }

    /// Polls for newer POI versions until cancelled.
    public func run() async {
        var version = start
        while !Task.isCancelled {
            do {
                while true {
                    let (pois, newest) = try await store.changes(after: version)
                    if !pois.isEmpty {
                        index.upsert(pois)
                        logger.debug("places index followed an import", metadata: ["pois": "\(pois.count)"])
                    }
                    version = newest
                    if pois.count < 10_000 { break }
                }
            } catch {
                logger.warning("cannot read POI changes; retrying", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }
}
