import AsyncHTTPClient
public import Delivery
public import EnrichmentCore
public import EnrichmentPostgres
import EnrichmentStorage
import EnrichmentUpstream
public import Essentials
import LocationCore
public import Logging
public import Tracing

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
    /// The enrichers of apps with their own enrichment settings (apps file), by app id.
    public let appEnrichers: [String: Enricher]

    /// The enricher for a device (by its stored key): its app's own, else the service's.
    public func enricher(forDevice key: String) -> Enricher {
        AppNamespace.pick(key, base: enricher, byApp: appEnrichers)
    }
    /// Writes POIs to the store, then to the index.
    public let importer: POIImporter
    public let clock: any WallClock
    /// Device token registrations.
    public let tokens: any DeviceTokenStore
    /// Pushes and their deliveries.
    public let outbox: any OutboxStore
    /// Live Activity tokens (push-to-start and update) and the order of each activity's updates.
    public let activities: any ActivityStore
    /// Broadcast channels the service made, and the clients that manage them and broadcast.
    public let channels: BroadcastChannels
    /// Enrich-and-send over the outbox (its workers run only when started: `delivery.run()`).
    public let delivery: DeliveryEngine
    /// With PostgreSQL: follows the POIs other nodes import into this node's index (runs in `runBackgroundWork`).
    public let placesFollower: PlacesIndexFollower?
    /// Visits, zones of interest, regions and their events.
    public let location: LocationEngine
    /// With PostgreSQL: what other nodes change, pushed by LISTEN/NOTIFY (runs in `runBackgroundWork`).
    public let changeFeed: PostgresChangeFeed?
    /// Notified when regions changed on any node (PostgreSQL).
    let regionSignal: ChangeSignal
    /// Whether the database is usable now (readiness).
    public let storageHealth: StorageHealthCheck
    /// Whether the places index is in (it loads in the background when `open` is asked to).
    public let placesLoading: PlacesLoading

    /// What the engine does in the background until cancelled: following other nodes' POI imports and regions
    /// (PostgreSQL), the daily location retention, the location webhook. Delivery has its own `delivery.run()`,
    /// stopped gracefully.
    public func runBackgroundWork() async {
        await withTaskGroup(of: Void.self) { group in
            if let placesFollower { group.addTask { await placesFollower.run() } }
            if let changeFeed { group.addTask { await changeFeed.run() } }
            let follow = postgres == nil ? nil : regionSignal
            let poll = Duration.milliseconds(Int64(configuration.pollInterval * 1000))
            group.addTask { await location.runBackgroundWork(followRegions: follow, interval: poll) }
        }
    }

    /// Opens (and migrates) the database and wires the engine; `clock` is injected so tests control "now".
    /// Logs nothing unless given a logger (command-line tools keep their standard output clean).
    /// `placesInBackground`: the places index loads after `open` returns (the service listens meanwhile; see
    /// `placesLoading`); otherwise it is in before `open` returns.
    public static func open(
        _ configuration: ServiceConfiguration, scope: Scope = .full, clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "enrichment-runtime", factory: { _ in SwiftLogNoOpLogHandler() }),
        deliveryObserver: (any DeliveryObserver)? = nil, tracer: (any Tracer)? = nil,
        placesInBackground: Bool = false
    ) async throws -> EnrichmentRuntime {
        try configuration.validate()
        var configuration = configuration
        try configuration.delivery.loadApps()
        let fixes: any FixStore
        let pois: any POIStore
        let tokens: any DeviceTokenStore
        let outbox: any OutboxStore
        let activities: any ActivityStore
        let channelStore: any ChannelStore
        let locationStore: any LocationStore
        let postgres: PostgresBackend?
        let storageHealth: StorageHealthCheck
        if let url = configuration.databaseURL {
            var settings = try PostgresSettings(url: url.exposed)
            settings.maximumConnections = configuration.databasePoolSize
            settings.connectTimeout = .milliseconds(Int64(configuration.databaseConnectTimeout * 1000))
            settings.startupWait = .milliseconds(Int64(configuration.databaseWait * 1000))
            let backend = try await PostgresBackend(settings: settings, logger: logger)
            logger.info("using PostgreSQL", metadata: ["database": "\(settings)"])
            postgres = backend
            storageHealth = .postgres(backend)
            // Shared by every node, so never cached; concurrent reads are coalesced into one query per batch.
            fixes = CoalescedFixStore(
                base: PostgresFixStore(database: backend), maximumBatches: max(1, configuration.databasePoolSize / 2))
            pois = PostgresPOIStore(database: backend)
            tokens = PostgresTokenStore(database: backend)
            outbox = PostgresOutbox(database: backend)
            activities = PostgresActivityStore(database: backend)
            channelStore = PostgresChannelStore(database: backend)
            locationStore = PostgresLocationStore(database: backend, deviceMemory: configuration.deviceMemory)
        } else {
            let database = try SQLiteDatabase(path: configuration.databasePath, durability: configuration.durability)
            if !SQLiteDatabase.memoryStatisticsOff {
                logger.warning(
                    "SQLite ran before its process-wide settings could be made: its memory statistics stay on (each of its allocations takes a process-wide lock); nothing else changes"
                )
            }
            postgres = nil
            storageHealth = .sqlite(database)
            fixes = CachingFixStore(base: SQLiteFixStore(database: database), capacity: configuration.deviceMemory)
            pois = SQLitePOIStore(database: database)
            tokens = SQLiteTokenStore(database: database)
            outbox = SQLiteOutbox(database: database)
            activities = SQLiteActivityStore(database: database)
            channelStore = SQLiteChannelStore(database: database)
            locationStore = SQLiteLocationStore(database: database, deviceMemory: configuration.deviceMemory)
        }
        let index: PlacesIndex
        if scope == .full, configuration.loadSamplePOIs, try await pois.count() == 0 {
            let samples = try SamplePOIs.load()
            _ = try await pois.upsert(samples)
            logger.info("loaded bundled sample POIs", metadata: ["count": "\(samples.count)"])
        }
        // The POI version before the index is read (and after the samples went in, which the index reads): changes
        // after it are applied again (an upsert), none is missed. Taken before the samples, it made every fresh
        // node apply them all again as changes: its whole index in the brute-force delta, searched on every fix.
        let startVersion = try await (pois as? PostgresPOIStore)?.currentVersion()
        if scope == .full {
            if placesInBackground {
                index = PlacesIndex(awaitingLoad: ())
            } else {
                index = PlacesIndex(try await pois.indexBuilder())
                logger.info("places index ready", metadata: ["pois": "\(index.count)"])
            }
        } else {
            index = PlacesIndex()
        }
        let placesLoading = PlacesLoading(loaded: !(scope == .full && placesInBackground))
        if !placesLoading.isLoaded {
            // Unstructured: it ends by itself once the index is in; the service answers meanwhile.
            Task { [pois, logger] in await placesLoading.run(store: pois, index: index, logger: logger) }
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
        let poll = Duration.milliseconds(Int64(configuration.pollInterval * 1000))
        let poiSignal = ChangeSignal()
        let regionSignal = ChangeSignal()
        // This process owns a SQLite file, so its own evaluations keep the contexts current; with PostgreSQL other
        // nodes evaluate too, so a context is read again after a second.
        let contexts = DeviceContexts(
            store: locationStore, ttl: postgres == nil ? .seconds(86_400 * 365) : .seconds(1),
            capacity: configuration.deviceMemory)
        // With PostgreSQL an enrichment reads its fix and its context in one statement, batched with its
        // neighbours': one batch in flight at most, so that under load the batches grow instead of multiplying
        // (each statement costs the node CPU: on a fast host 1 measured 9,800-13,400 req/s with a lower p99, 2
        // 8,600-9,600; on a slower one 1 and 2 were level and 4 slower: BENCHMARKS.md).
        let snapshots = (locationStore as? PostgresLocationStore).map { store in
            DeviceSnapshots(maximumBatches: 1) { ids in
                try await store.readSnapshots(deviceIds: ids)
            }
        }
        let enricher = Enricher(
            settings: configuration.enrichmentSettings, fixes: fixes, places: places, map: map, template: template,
            clock: clock, contexts: contexts, snapshots: snapshots, tracer: tracer)
        let appEnrichers = try configuration.appEnrichers(base: enricher)
        // Read once: the push senders and the channel clients share each key's token manager.
        let credentials =
            scope == .full
            ? try configuration.delivery.loadCredentials() : LoadedCredentials(credentials: [], trust: nil)
        let delivery = DeliveryEngine(
            tokens: tokens, outbox: outbox, activities: activities, settings: configuration.delivery,
            enricher: enricher, appEnrichers: appEnrichers,
            senders: try configuration.delivery.makeSenders(credentials), clock: clock, logger: logger,
            observer: deliveryObserver, exclusiveStore: postgres == nil, pollInterval: poll,
            databaseTimeout: postgres == nil ? nil : .milliseconds(Int64(configuration.databaseConnectTimeout * 1000)),
            identities: credentials.identities)
        let location = try await LocationEngine(
            store: locationStore, fixes: fixes, settings: configuration.location,
            index: configuration.places == .local ? index : nil, webhookURL: configuration.locationWebhookURL,
            delivery: delivery, contexts: contexts, clock: clock, logger: logger,
            deviceMemory: configuration.deviceMemory)
        return EnrichmentRuntime(
            configuration: configuration, postgres: postgres, fixes: fixes, pois: pois, index: index, places: places,
            map: map, template: template, enricher: enricher, appEnrichers: appEnrichers,
            importer: POIImporter(store: pois, index: scope == .full ? index : nil), clock: clock, tokens: tokens,
            outbox: outbox, activities: activities,
            channels: BroadcastChannels(
                store: channelStore,
                clients: try configuration.delivery.makeChannelClients(credentials),
                settings: configuration.delivery),
            delivery: delivery,
            placesFollower: scope == .full
                ? (pois as? PostgresPOIStore).map {
                    PlacesIndexFollower(
                        store: $0, index: index, from: startVersion ?? 0, interval: poll, signal: poiSignal,
                        logger: logger)
                } : nil, location: location,
            changeFeed: postgres.map { backend in
                PostgresChangeFeed(database: backend, logger: logger) { [delivery] kind in
                    switch kind {
                    case .pois: poiSignal.notify()
                    case .deliveries: delivery.wake()
                    case .regions: regionSignal.notify()
                    }
                }
            }, regionSignal: regionSignal, storageHealth: storageHealth, placesLoading: placesLoading)
    }
}

extension ServiceConfiguration {
    /// One enricher per app whose apps-file entry has `"enrichment"`: the service's, with what the app sets
    /// (templates, places search, map style) in place of the service's.
    func appEnrichers(base: Enricher) throws -> [String: Enricher] {
        var enrichers: [String: Enricher] = [:]
        for app in delivery.apps?.apps ?? [] {
            guard let own = app.enrichment else { continue }
            var settings = enrichmentSettings
            let query = try own.placesQuery.map { text in try PlaceFilter.parse(text) } ?? placesQuery
            settings.placesQuery = PlacesQuery(
                limit: own.placesLimit ?? placesLimit, radius: own.placesRadius ?? placesRadius,
                filter: PlaceFilter.combining(
                    types: own.placesTypes ?? placesTypes, tags: own.placesTags ?? placesTags, query: query))
            let template = try BodyTemplate(
                poi: own.bodyTemplate ?? bodyTemplate, location: own.locationTemplate ?? locationTemplate)
            var map: StaticMapBuilder?? = nil
            if let style = own.mapStyle, mapEnabled {
                map = .some(
                    try StaticMapBuilder(
                        style: style, baseURL: mapBaseURL, apiKey: mapKey, signingSecret: mapSigningSecret))
            }
            enrichers[app.id] = base.adapted(settings: settings, template: template, map: map)
        }
        return enrichers
    }

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

/// Applies the POI changes of every node (upserts and deletes, in version order) to this node's in-memory index:
/// at once when the change feed says POIs changed, and at least every `interval` (the safety net).
public struct PlacesIndexFollower: Sendable {
    let store: PostgresPOIStore
    let index: PlacesIndex
    let start: Int64
    let interval: Duration
    let signal: ChangeSignal
    let logger: Logger

    init(
        store: PostgresPOIStore, index: PlacesIndex, from start: Int64, interval: Duration = .seconds(1),
        signal: ChangeSignal = ChangeSignal(), logger: Logger
    ) {
        self.store = store
        self.index = index
        self.start = start
        self.interval = interval
        self.signal = signal
        self.logger = logger
    }

    /// Follows until cancelled.
    public func run() async {
        var version = start
        while !Task.isCancelled {
            let seen = signal.generation
            do {
                while true {
                    let (changes, newest) = try await store.changes(after: version)
                    apply(changes)
                    if !changes.isEmpty {
                        logger.debug("places index followed changes", metadata: ["changes": "\(changes.count)"])
                    }
                    let caughtUp = newest == version || changes.count < 10_000
                    version = newest
                    if caughtUp { break }
                }
            } catch {
                logger.warning("cannot read POI changes; retrying", metadata: ["error": "\(error)"])
            }
            await signal.wait(since: seen, timeout: interval)
        }
    }

    /// Applies runs of upserts and of deletes in their order.
    func apply(_ changes: [POIChange]) {
        var upserts: [POI] = []
        var deletes: [String] = []
        func flush() {
            if !upserts.isEmpty { index.upsert(upserts) }
            if !deletes.isEmpty { index.remove(deletes) }
            upserts = []
            deletes = []
        }
        for change in changes {
            switch change {
            case .upsert(let poi):
                if !deletes.isEmpty { flush() }
                upserts.append(poi)
            case .delete(let storeId):
                if !upserts.isEmpty { flush() }
                deletes.append(storeId)
            }
        }
        flush()
    }
}
