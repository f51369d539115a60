import APNsCore
import Delivery
public import EnrichmentCore
public import Essentials
import Foundation
public import LocationCore
import Logging
import Synchronization

/// Location intelligence over the stores (docs/LOCATION-RULES.md): reported and detected visits through the SDK's ZOI
/// pipeline, custom, POI and zone regions evaluated as fixes arrive, their events, the webhook, region pushes,
/// retention, and the device context the enricher offers its template.
public final class LocationEngine: Sendable {
    public let store: any LocationStore
    public let settings: LocationSettings
    let fixes: any FixStore
    let intake: VisitIntake
    let evaluator: RegionEvaluator
    let detector: VisitDetector
    /// The local places index the POI regions come from (nil: no POI regions).
    let index: PlacesIndex?
    let clock: any WallClock
    let logger: Logger
    let webhook: WebhookQueue?
    let delivery: DeliveryEngine?
    let custom: Mutex<AppRegionSets>
    /// The device contexts the enricher reads, refreshed here as regions are evaluated.
    public let contexts: DeviceContexts

    /// Where audiences find the devices' zones of interest and visits (nil: the store keeps no grid of them).
    public var audienceHistory: (any AudienceHistory)? { store as? any AudienceHistory }

    /// Where the detector is to resume per device, not yet written: folded into the device's next region-state
    /// write instead of a transaction of its own (lost on a crash, which only makes the detector read a little
    /// more: detected visits have stable ids, so none is stored twice).
    let pendingDetect: Mutex<BoundedMap<String, Double>>

    /// Most fixes the detector reads for one device at a time.
    static let detectorWindow = 50_000

    init(
        store: any LocationStore, fixes: any FixStore, settings: LocationSettings, index: PlacesIndex?,
        webhookURL: String?, delivery: DeliveryEngine?, contexts: DeviceContexts, clock: any WallClock,
        logger: Logger, deviceMemory: Int = 200_000
    ) async throws {
        pendingDetect = Mutex(BoundedMap(capacity: deviceMemory))
        self.store = store
        self.fixes = fixes
        self.settings = settings
        self.intake = VisitIntake(settings: settings)
        self.evaluator = RegionEvaluator(settings: settings)
        self.detector = VisitDetector(parameters: settings.detector)
        self.index = settings.poiRegionsEnabled ? index : nil
        self.clock = clock
        self.logger = logger
        self.webhook = webhookURL.map { WebhookQueue(url: $0, name: "location", logger: logger) }
        self.delivery = delivery
        self.contexts = contexts
        self.custom = Mutex(AppRegionSets(try await store.regions()))
    }

    // MARK: Visits

    /// What a visits request did.
    public struct VisitReport: Sendable {
        public var accepted: [Visit]
        public var rejected: [VisitIntake.Rejection]
        public var events: Int
    }

    /// Runs a `{"visits": [...]}` document through §1.2, §3.7 and §2 for the device, in order, and commits it.
    public func reportVisits(deviceId: String, document: JSONValue) async throws -> VisitReport {
        let items = try VisitIntake.parse(document)
        return try await process(items, deviceId: deviceId)
    }

    func process(_ items: [Result<VisitIntake.Item, VisitIntake.Rejection>], deviceId: String) async throws
        -> VisitReport
    {
        let now = clock.now().timeIntervalSince1970
        let intake = self.intake
        let (outcome, events) = try await store.updateVisits(deviceId: deviceId) { state in
            let (change, outcome) = intake.run(items, deviceId: deviceId, state: state, now: now)
            return (change, (outcome, change.events))
        }
        publish(events)
        contexts.forget(deviceId)
        return VisitReport(accepted: outcome.accepted, rejected: outcome.rejected, events: events.count)
    }

    /// The device's ZOIs, or nil when the service knows nothing of the device.
    public func zois(deviceId: String) async throws -> [ZoneOfInterest]? {
        let zois = try await store.zois(deviceId: deviceId)
        if zois.isEmpty, try await !store.knowsDevice(deviceId) { return nil }
        return zois
    }

    /// The device's visits, or nil when the service knows nothing of the device.
    public func visits(deviceId: String) async throws -> [Visit]? {
        let visits = try await store.visits(deviceId: deviceId)
        if visits.isEmpty, try await !store.knowsDevice(deviceId) { return nil }
        return visits
    }

    /// The device's events (oldest first), or nil when the service knows nothing of the device.
    public func events(deviceId: String, limit: Int) async throws -> [LocationEvent]? {
        let events = try await store.events(deviceId: deviceId, limit: limit)
        if events.isEmpty, try await !store.knowsDevice(deviceId) { return nil }
        return events
    }

    // MARK: Regions

    /// Reads a `POST /v1/regions` body into a custom region (`custom_<id>`), checked against the settings.
    public func region(from document: JSONValue) throws(RegionProblem) -> Region {
        try Region.custom(from: document, radius: settings.customRadius)
    }

    /// Adds or replaces a custom region; returns whether it was new.
    public func putRegion(_ region: Region) async throws -> Bool {
        let created = try await store.putRegion(region)
        try await reloadRegions()
        return created
    }

    public func regions() async throws -> [Region] { try await store.regions() }

    /// Removes a custom region by its stored id (`custom_…`, or `<app>/custom_…`).
    public func deleteRegion(id stored: String) async throws -> Bool {
        let removed = try await store.deleteRegion(id: stored)
        try await reloadRegions()
        return removed
    }

    /// Reads the custom regions again (other nodes may have changed them).
    public func reloadRegions() async throws {
        let regions = try await store.regions()
        custom.withLock { $0 = AppRegionSets(regions) }
    }

    // MARK: Fixes

    /// Whether `ingested` evaluates anything (and so gains from `PriorFixes`).
    public var evaluatesFixes: Bool { settings.regionsEnabled || settings.detectVisits }

    /// Evaluates regions on fixes just stored, then looks for visits in them; returns how many events came out.
    ///
    /// Called after the fixes are committed: a failure here loses no fix (the next batch evaluates from where
    /// this one stopped). `prior`: what the store said of each device's fixes before the batch
    /// (`insertReportingPrior`), which spares reading them back.
    @discardableResult
    public func ingested(_ batch: [LocationFix], prior: PriorFixes? = nil) async throws -> Int {
        let evaluation = try await evaluate(ingested: batch, prior: prior)
        if let failure = evaluation.visitFailures.values.first { throw failure }
        return evaluation.events.values.reduce(0, +)
    }

    /// What evaluating a batch of fixes said, device by device.
    public struct IngestEvaluation: Sendable {
        /// How many events each device's fixes made.
        public var events: [String: Int] = [:]
        /// Devices whose visit detection failed (their region evaluation and events stand; the next batch detects
        /// from where this one could not).
        public var visitFailures: [String: any Error] = [:]
    }

    /// `ingested`, device by device: a batch gathered from several reports answers each report with its own
    /// events, and one device's failed visit detection fails only that device. Throws when the batch's region
    /// evaluation (one transaction for every device) fails.
    public func evaluate(ingested batch: [LocationFix], prior: PriorFixes? = nil) async throws -> IngestEvaluation {
        guard !batch.isEmpty, settings.regionsEnabled || settings.detectVisits else { return IngestEvaluation() }
        var byDevice: [String: [LocationFix]] = [:]
        batch.forEachDeviceRun { device, fixes in byDevice[device, default: []].append(contentsOf: fixes) }
        let regionsOn = settings.regionsEnabled
        let evaluator = self.evaluator
        let zoneRadius = settings.classifiedZOIRadius
        let grouped = byDevice
        // The searches depend on the fixes alone: done here, outside the transaction, so devices evaluated side
        // by side do not wait on each other's searches while a writer holds the database.
        // Custom regions per app (a device sees its own app's), POIs for every app.
        var reach: [Coordinate: Double] = [:]
        var appReach: [String: [Coordinate: Double]] = [:]
        if regionsOn {
            batch.forEachDeviceRun { device, fixes in
                func widen(_ points: inout [Coordinate: Double]) {
                    for fix in fixes {
                        points[fix.coordinate] = max(points[fix.coordinate] ?? 0, fix.horizontalAccuracy ?? 0)
                    }
                }
                widen(&reach)
                widen(&appReach[AppNamespace.app(of: device), default: [:]])
            }
        }
        let customSets = custom.withLock { $0 }
        let perDevice = settings.customRegionsPerDevice
        var customNear: [String: [Coordinate: [Region]]] = [:]
        var poisNear: [Coordinate: [PlaceMatch]] = [:]
        let query = PlacesQuery(limit: settings.poiRegionsCount)
        for (app, points) in appReach {
            guard let set = customSets.byApp[app] else { continue }
            for (point, accuracy) in points {
                customNear[app, default: [:]][point] = set.nearest(point, count: perDevice, reach: accuracy)
            }
        }
        if let index {
            // Decoded once: a region reads each POI's fields several times.
            for point in reach.keys { poisNear[point] = index.nearest(to: point, query: query).map(\.decoded) }
        }
        // Where a device was before its batch matters only when the batch's first fix may enter a POI region at once
        // (§4.3: was the region monitored at the fix before?); read for those devices alone, and searched.
        var before: [String: Coordinate] = [:]
        if let index {
            let radius = settings.poiRegionRadius
            for (device, fixes) in byDevice {
                guard let first = fixes.min(by: { $0.fixTime < $1.fixTime }),
                    (poisNear[first.coordinate] ?? []).contains(where: { $0.distance <= radius + 1 })
                else { continue }
                let earlier: LocationFix?
                if let known = prior?.byDevice[device] {
                    earlier = known
                } else {
                    earlier = try await self.fixes.fix(deviceId: device, before: first.fixTime)
                }
                guard let earlier else { continue }
                before[device] = earlier.coordinate
                if poisNear[earlier.coordinate] == nil {
                    poisNear[earlier.coordinate] = index.nearest(to: earlier.coordinate, query: query).map(\.decoded)
                }
            }
        }
        let searchedCustom = customNear
        let searchedPOIs = poisNear
        let positionsBefore = before
        let poisOn = index != nil
        let pending = pendingDetect.withLock { all in grouped.keys.compactMap { id in all.peek(id).map { (id, $0) } } }
        let resumeAt = Dictionary(uniqueKeysWithValues: pending)
        let (events, detectFrom, contexts) = try await store.updateRegionStates(deviceIds: Array(grouped.keys)) {
            states, zones in
            var updated = states
            var events: [LocationEvent] = []
            var detectFrom: [String: (after: Double?, evaluatedUntil: Double?)] = [:]
            var contexts: [String: DeviceContext] = [:]
            for (device, fixes) in grouped {
                var state = states[device] ?? DeviceRegionState()
                if let resume = resumeAt[device], resume > (state.detectAfter ?? -Double.infinity) {
                    state.detectAfter = resume
                }
                detectFrom[device] = (state.detectAfter, regionsOn ? state.lastFixTime : nil)
                if regionsOn {
                    let customSet = customSets.set(forDevice: device)
                    let near = searchedCustom[AppNamespace.app(of: device)] ?? [:]
                    let zoneRegions = (zones[device] ?? []).map { RegionEvaluator.zoneRegion($0, radius: zoneRadius) }
                    events += evaluator.evaluate(
                        fixes.map { .init(fix: $0, wifiSSID: $0.wifiSSID, wifiBSSID: $0.wifiBSSID) }, deviceId: device,
                        state: &state, zones: zoneRegions,
                        custom: {
                            (near[$0.fix.coordinate] ?? [])
                                + customSet.onNetwork(ssid: $0.wifiSSID, bssid: $0.wifiBSSID)
                        },
                        customById: { customSet.byId[$0] },
                        pois: poisOn ? { searchedPOIs[$0] ?? [] } : nil, before: positionsBefore[device])
                    contexts[device] = DeviceContexts.context(state, zones: zones[device] ?? [])
                }
                updated[device] = state
            }
            return (updated, events, (events, detectFrom, contexts))
        }
        self.contexts.remember(contexts)
        publish(events)
        await pushOnEnter(events, regions: customSets)
        var evaluation = IngestEvaluation()
        for event in events { evaluation.events[event.deviceId, default: 0] += 1 }
        if settings.detectVisits {
            for (device, from) in detectFrom {
                do {
                    try await detectVisits(
                        deviceId: device, after: from.after, batch: grouped[device] ?? [],
                        evaluatedUntil: from.evaluatedUntil, prior: prior?.byDevice[device])
                } catch {
                    evaluation.visitFailures[device] = error
                }
            }
        }
        return evaluation
    }

    /// Runs the detector over the device's fixes after `after` and reports what it finds as visits.
    ///
    /// When the batch comes after every fix evaluated before (`evaluatedUntil`, the usual case), the store holds
    /// nothing later than the batch but the batch itself: only the fixes between `after` and the batch are read,
    /// and the batch comes from memory. Otherwise (a late batch) everything after `after` is read. `prior`, when
    /// the store told it, is the device's newest fix before the batch: none after `after` means nothing to read.
    func detectVisits(
        deviceId: String, after: Double?, batch: [LocationFix], evaluatedUntil: Double?, prior: LocationFix?? = nil
    ) async throws {
        let start = after ?? -Double.greatestFiniteMagnitude
        let first = batch.map(\.fixTime).min() ?? Double.infinity
        let fixes: [LocationFix]
        let nothingBefore = prior.map { ($0?.fixTime ?? -Double.infinity) <= start } ?? false
        if nothingBefore || evaluatedUntil.map({ $0 < first }) == true {
            let earlier =
                nothingBefore
                ? []
                : try await self.fixes.fixes(
                    deviceId: deviceId, after: start, before: first, limit: Self.detectorWindow)
            // Repeated fix times in a batch: the store kept the later one, so does this.
            var latest: [Double: LocationFix] = [:]
            for fix in batch where fix.fixTime > start { latest[fix.fixTime] = fix }
            fixes = earlier + latest.values.sorted { $0.fixTime < $1.fixTime }
        } else {
            fixes = try await self.fixes.fixes(
                deviceId: deviceId, after: start, before: Double.infinity, limit: Self.detectorWindow)
        }
        guard !fixes.isEmpty else { return }
        let (items, resume) = detector.scan(fixes, deviceId: deviceId)
        if !items.isEmpty {
            let report = try await process(items.map { .success($0) }, deviceId: deviceId)
            if !report.accepted.isEmpty {
                logger.debug("visits detected from fixes", metadata: ["count": "\(report.accepted.count)"])
            }
        }
        guard let resume, resume != after else { return }
        pendingDetect.withLock { all in
            // Bounded (a forgotten position only costs a longer read). Only forward: a concurrent batch may have
            // moved it further.
            if (all[deviceId] ?? -Double.infinity) < resume { all[deviceId] = resume }
        }
    }

    /// A region with a push payload sends it (enriched) to the device when the device enters.
    func pushOnEnter(_ events: [LocationEvent], regions: AppRegionSets) async {
        guard let delivery else { return }
        for event in events where event.type == "region_enter" {
            guard case .string(let id)? = event.fields["region_id"], var payload = regions.region(id: id)?.pushPayload
            else {
                continue
            }
            // The push is made now: stamped now unless the template carries its own timestamp, so the staleness
            // rule judges how long it waited for delivery.
            let now = clock.now().timeIntervalSince1970
            if payload["aps"]?["timestamp"] == nil { payload["aps"]?["timestamp"] = .int(Int64(now)) }
            let push = PushDefinition(
                id: RandomUUID.lowercased(), createdAt: now, payload: payload,
                pushType: .alert, priority: .immediately, enrich: true, deviceIds: [event.deviceId],
                origin: .regionEntry)
            do {
                let receipt = try await delivery.submit(push)
                logger.info(
                    "region entry push submitted",
                    metadata: ["region": "\(id)", "push": "\(push.id)", "deliveries": "\(receipt.deliveries)"])
            } catch {
                logger.warning("region entry push not submitted", metadata: ["region": "\(id)", "error": "\(error)"])
            }
        }
    }

    func publish(_ events: [LocationEvent]) {
        guard let webhook else { return }
        for event in events { webhook.post(JSONWriter.bytes(event.webhookJSON)) }
    }
}
