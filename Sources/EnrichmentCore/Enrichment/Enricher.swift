public import Essentials
public import Foundation
import Logging
public import Tracing

/// Settings of the enrichment flow.
public struct EnrichmentSettings: Sendable {
    public var mode: BodyMode
    public var staleness: StalenessPolicy
    /// A fix older than this many seconds counts as no fix.
    public var fixMaxAge: Double
    /// The places search made for each enrichment.
    public var placesQuery: PlacesQuery
    /// The whole places step must finish within this; after it the result is `degraded`.
    public var deadline: Duration

    public init(
        mode: BodyMode = .default, staleness: StalenessPolicy = StalenessPolicy(), fixMaxAge: Double = 3600,
        placesQuery: PlacesQuery = PlacesQuery(), deadline: Duration = .seconds(2)
    ) {
        self.mode = mode
        self.staleness = staleness
        self.fixMaxAge = fixMaxAge
        self.placesQuery = placesQuery
        self.deadline = deadline
    }
}

/// Runs the Notification Service Extension flow on the server: staleness, fix, places, map, body.
public struct Enricher: Sendable {
    public var settings: EnrichmentSettings
    public let fixes: any FixStore
    /// The POI search; nil means "places not configured" (woosmap's map-only and neither modes).
    public let places: (any PlacesProvider)?
    /// The static map builder; nil means "map not configured".
    public let map: StaticMapBuilder?
    public let template: BodyTemplate
    public let clock: any WallClock
    /// The device's regions and zone for the template (nil without location intelligence).
    public let contexts: (any DeviceContextProvider)?
    /// Reads the fix and the context in one trip where each read is a round trip (PostgreSQL); nil reads them
    /// from `fixes` and `contexts`.
    public let snapshots: (any DeviceSnapshotProvider)?
    /// Where the spans of each enrichment go: the process's tracer when an OTLP endpoint is set, else none.
    public let spans: SpanRecorder

    public init(
        settings: EnrichmentSettings, fixes: any FixStore, places: (any PlacesProvider)?,
        map: StaticMapBuilder?, template: BodyTemplate, clock: any WallClock = SystemWallClock(),
        contexts: (any DeviceContextProvider)? = nil, snapshots: (any DeviceSnapshotProvider)? = nil,
        tracer: (any Tracer)? = nil
    ) {
        self.contexts = contexts
        self.snapshots = snapshots
        self.spans = tracer.map { SpanRecorder($0) } ?? .process
        self.settings = settings
        self.fixes = fixes
        self.places = places
        self.map = map
        self.template = template
        self.clock = clock
    }

    /// This enricher with other settings, template, map and (for a batch) fixes: an app's own enrichment.
    public func adapted(
        settings: EnrichmentSettings? = nil, template: BodyTemplate? = nil, map: StaticMapBuilder?? = nil,
        fixes: (any FixStore)? = nil, contexts: (any DeviceContextProvider)? = nil, keepSnapshots: Bool = true
    ) -> Enricher {
        Enricher(
            settings: settings ?? self.settings, fixes: fixes ?? self.fixes, places: places, map: map ?? self.map,
            template: template ?? self.template, clock: clock, contexts: self.contexts.map { contexts ?? $0 },
            snapshots: keepSnapshots ? snapshots : nil, tracer: spans.tracer)
    }

    /// This enricher for a batch of deliveries: the batch's prefetched `fixes` (and `contexts`, when this enricher
    /// reads contexts at all), no shared snapshot reads, and with a
    /// places provider that answers at once (the local index) only the nearest POI searched: a delivery sends the
    /// body and the map, which name only the nearest POI's name, address and position, and never reads the
    /// result's list of POIs. (A remote places API is asked as `/v1/enrich` asks it; no enrichment asks for the
    /// POIs' contact and user properties, see `search`.)
    public func forDelivery(fixes: any FixStore, contexts: PrefetchedContexts? = nil) -> Enricher {
        var settings = self.settings
        if places?.answersImmediately == true {
            settings.placesQuery.limit = min(settings.placesQuery.limit, 1)
        }
        return adapted(settings: settings, fixes: fixes, contexts: contexts, keepSnapshots: false)
    }

    /// The top-level key that carries the map URL for the device (the extension downloads and attaches it).
    public static let attachmentKey = "attachment-url"

    /// Enriches `payload` for `deviceId`, evaluated as of `at` (default: the clock's now).
    ///
    /// Throws only for input that can never be delivered (payload over 4096 bytes); upstream failures produce a
    /// `degraded` result instead.
    public func enrich(
        deviceId: String, payload: NotificationPayload, at: Date? = nil,
        mode modeOverride: BodyMode? = nil, staleness stalenessOverride: StalenessPolicy? = nil,
        fix fixOverride: LocationFix? = nil
    ) async throws -> EnrichmentResult {
        try await spans.run("enrichment") { span in
            let result = try await evaluate(
                deviceId: deviceId, payload: payload, at: at, mode: modeOverride, staleness: stalenessOverride,
                fix: fixOverride)
            span?.attributes["enrichment.outcome"] = result.outcome.rawValue
            span?.attributes["enrichment.rule"] = result.rule
            return result
        }
    }

    private func evaluate(
        deviceId: String, payload: NotificationPayload, at: Date?, mode modeOverride: BodyMode?,
        staleness stalenessOverride: StalenessPolicy?, fix fixOverride: LocationFix?
    ) async throws -> EnrichmentResult {
        var draft: Draft
        switch try begin(payload: payload, at: at, mode: modeOverride, staleness: stalenessOverride) {
        case .finished(let result): return result
        case .wantsFix(let pending): draft = pending
        }
        // The fix and the device's context (used only with the fix): one read where each read is a round trip
        // (a shared database), else the context is read once the fix is known to be usable. A fix given for this
        // evaluation only (QA) stands in for the stored one.
        let stored: LocationFix?
        // The fix and context read together, when they were (the context may itself be nil).
        var snapshot: DeviceSnapshot?
        if fixOverride == nil, let snapshots {
            snapshot = try await spans.run("db.device_snapshot", kind: .client) { _ in
                try await snapshots.snapshot(deviceId: deviceId)
            }
            stored = snapshot?.fix
        } else if let fixOverride {
            stored = fixOverride
        } else {
            stored = try await spans.run("db.latest_fix", kind: .client) { _ in
                try await fixes.latestFix(deviceId: deviceId)
            }
        }
        if let result = try located(&draft, fix: stored) { return result }
        let context = snapshot != nil ? snapshot?.context : await readContext(deviceId)
        guard let places else { return try placeless(&draft, context: context) }
        draft.deviceContext = context
        draft.placesProvider = places.name
        let started = ContinuousClock.now
        let searched = await spans.run("places.search") { span in
            span?.attributes["places.provider"] = places.name
            return await search(places, near: draft.user)
        }
        draft.placesMilliseconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1000
        return try placed(draft, searched)
    }

    /// Enriches as `enrich` does when every read it needs is already in memory (the device's last fix and context
    /// cached, the places searched in memory) and no span is to be made; nil when one is not, so the caller runs
    /// `enrich` instead. The same steps as `enrich` give the same result: the server answers a `POST /v1/enrich`
    /// with this on its event loop, with no task (`EnrichOnEventLoop`).
    public func enrichNow(
        deviceId: String, payload: NotificationPayload, at: Date? = nil,
        mode modeOverride: BodyMode? = nil, staleness stalenessOverride: StalenessPolicy? = nil,
        fix fixOverride: LocationFix? = nil
    ) throws -> EnrichmentResult? {
        guard spans.tracer == nil else { return nil }
        var draft: Draft
        switch try begin(payload: payload, at: at, mode: modeOverride, staleness: stalenessOverride) {
        case .finished(let result): return result
        case .wantsFix(let pending): draft = pending
        }
        let stored: LocationFix?
        if let fixOverride {
            stored = fixOverride
        } else {
            // A shared database is read each time (no cache there can be trusted across nodes).
            guard snapshots == nil, let cached = fixes.cachedLatestFix(deviceId: deviceId) else { return nil }
            stored = cached
        }
        if let result = try located(&draft, fix: stored) { return result }
        var context: DeviceContext?
        if let contexts {
            guard let cached = contexts.cachedContext(deviceId: deviceId) else { return nil }
            context = cached
        }
        guard let places else { return try placeless(&draft, context: context) }
        let started = ContinuousClock.now
        guard let searched = places.nearestNow(to: draft.user, query: settings.placesQuery.withoutDetails) else {
            return nil
        }
        draft.deviceContext = context
        draft.placesProvider = places.name
        draft.placesMilliseconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1000
        return try placed(draft, searched)
    }

    /// Where an evaluation stands after the checks that need no read: finished, or wanting the device's fix.
    private enum Begun {
        case finished(EnrichmentResult)
        case wantsFix(Draft)
    }

    /// The payload's size, the extension's preconditions, the timestamp's verdict and the category: no read.
    private func begin(
        payload: NotificationPayload, at: Date?, mode modeOverride: BodyMode?,
        staleness stalenessOverride: StalenessPolicy?
    ) throws -> Begun {
        let now = at ?? clock.now()
        let mode = modeOverride ?? settings.mode
        let policy = stalenessOverride ?? settings.staleness
        let inputSize = payload.encodedSize
        if inputSize > NotificationPayload.maximumSize {
            throw PayloadError.tooLarge(bytes: inputSize, limit: NotificationPayload.maximumSize)
        }
        var draft = Draft(mode: mode, payload: payload, now: now)
        draft.rules = policy

        // iOS runs an extension only for a mutable push with a visible alert.
        guard payload.isMutable else { return .finished(try draft.finish(.unchanged, rule: "mutable_content_missing")) }
        guard payload.hasVisibleAlert else { return .finished(try draft.finish(.unchanged, rule: "no_visible_alert")) }

        // The timestamp is checked first, for any category.
        let verdict = policy.evaluate(payload.readTimestamp(mode: mode), now: now)
        draft.staleness = verdict
        draft.hints += verdict.hints
        draft.legacyShape = verdict.source == .legacyTopLevel
        switch verdict.state {
        case .noTimestamp:
            if mode == .woosmap { draft.body = WoosmapBody.noTimestamp }
            return .finished(try draft.finish(.noTimestamp, rule: verdict.rule.rawValue))
        case .stale:
            if mode == .woosmap { draft.body = WoosmapBody.outOfTime }
            return .finished(try draft.finish(.stale, rule: verdict.rule.rawValue))
        case .fresh:
            break
        }

        let request = payload.locationRequest(mode: mode)
        draft.legacyShape = draft.legacyShape || request.legacy
        guard request.wanted else { return .finished(try draft.finish(.unchanged, rule: "category_not_location")) }
        return .wantsFix(draft)
    }

    /// The device's fix judged: the result when there is none or it is too old, else nil with the draft's fix and
    /// user position set.
    private func located(_ draft: inout Draft, fix stored: LocationFix?) throws -> EnrichmentResult? {
        guard let fix = stored else {
            return try draft.finish(.noFix, rule: "no_fix_reported")
        }
        let age = draft.now.timeIntervalSince1970 - fix.fixTime
        if age < 0 {
            // The rules are unchanged (the newest fix is the last fix); the caller should know.
            draft.hints.append(
                "the device's last fix was taken \(Int((-age).rounded(.up))) s after the evaluation time: "
                    + "evaluating in the past still uses the newest fix")
        }
        draft.fix = EnrichmentResult.FixUsed(
            latitude: fix.coordinate.latitude, longitude: fix.coordinate.longitude, fixTime: fix.fixTime,
            ageSeconds: age, horizontalAccuracy: fix.horizontalAccuracy, context: fix.context)
        guard age <= settings.fixMaxAge else { return try draft.finish(.noFix, rule: "fix_too_old") }
        draft.user = fix.coordinate
        return nil
    }

    /// Map-only or neither (no places provider): the SDK writes the location lines.
    private func placeless(_ draft: inout Draft, context: DeviceContext?) throws -> EnrichmentResult {
        let user = draft.user
        draft.deviceContext = context
        draft.body =
            draft.mode == .woosmap ? WoosmapBody.location(user) : template.render(location: user, context: context)
        draft.mapURL = map?.url(user: user, poi: nil)
        return try draft.finish(.enriched, rule: map == nil ? "location_only" : "location_and_map")
    }

    /// The result from the places search's answer.
    private func placed(_ draft: Draft, _ searched: Result<[PlaceMatch], PlacesError>) throws -> EnrichmentResult {
        var draft = draft
        let (user, mode, context) = (draft.user, draft.mode, draft.deviceContext)
        switch searched {
        case .failure(let error):
            draft.degraded = EnrichmentResult.Degradation(reason: error.reason, message: error.description)
            if mode == .woosmap, case .httpStatus(let status) = error {
                draft.body = WoosmapBody.searchError(status: status)
            } else {
                draft.body =
                    mode == .woosmap ? WoosmapBody.location(user) : template.render(location: user, context: context)
                draft.mapURL = map?.url(user: user, poi: nil)
            }
            return try draft.finish(.degraded, rule: error.reason)
        case .success(let matches):
            draft.pois = matches.map(EnrichmentResult.POIUsed.init)
            guard let nearest = matches.first else {
                draft.mapURL = map?.url(user: user, poi: nil)
                return try draft.finish(.noPOI, rule: "no_poi_found")
            }
            draft.body =
                mode == .woosmap
                ? WoosmapBody.body(user: user, poi: nearest, mapConfigured: map != nil)
                : template.render(poi: nearest, user: user, context: context)
            draft.mapURL = map?.url(user: user, poi: nearest.coordinate)
            return try draft.finish(.enriched, rule: "nearest_poi")
        }
    }

    /// The device's context for the template; a nicety: a failure to read it never fails the enrichment.
    private func readContext(_ deviceId: String) async -> DeviceContext? {
        guard let contexts else { return nil }
        return await spans.run("db.device_context", kind: .client) { _ in
            try? await contexts.context(deviceId: deviceId)
        }
    }

    /// Runs the places search under the total deadline.
    private func search(_ places: any PlacesProvider, near point: Coordinate) async -> Result<[PlaceMatch], PlacesError>
    {
        // The result lists no POI's contact or user properties, and no template reads them: not parsed.
        let query = settings.placesQuery.withoutDetails
        let deadline = settings.deadline
        if places.answersImmediately {
            do throws(PlacesError) { return .success(try await places.nearest(to: point, query: query)) } catch {
                return .failure(error)
            }
        }
        return await withTaskGroup(of: Result<[PlaceMatch], PlacesError>?.self) { group in
            group.addTask {
                do throws(PlacesError) { return .success(try await places.nearest(to: point, query: query)) } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: deadline)
                return Task.isCancelled ? nil : .failure(.timeout(seconds: Double(deadline / .milliseconds(1)) / 1000))
            }
            var answer: Result<[PlaceMatch], PlacesError> = .failure(.timeout(seconds: 0))
            for await result in group {
                if let result {
                    answer = result
                    break
                }
            }
            group.cancelAll()
            return answer
        }
    }
}
