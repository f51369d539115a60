import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird
import LocationCore

/// Location audiences (issue 30): `POST /v1/audiences/preview` answers who an audience holds now, without
/// sending; `POST /v1/push` takes the same `audience` instead of `device_ids`.
struct AudienceRoutes {
    let state: ServiceState

    /// Most device ids a preview lists.
    static let maximumSample = 1_000

    /// POIs and the request's app's custom regions, for `near` by POI and `in_region`.
    struct Places: Audience.Places {
        let state: ServiceState
        let app: String

        func poiPosition(_ id: String) async throws -> Coordinate? {
            try await state.pois.poi(storeId: id)?.coordinate
        }

        func region(_ id: String) async throws -> Audience.RegionTarget? {
            let stored = AppNamespace.key(app: app, id: id.hasPrefix("custom_") ? id : "custom_\(id)")
            guard let region = try await state.location.regions().first(where: { $0.id == stored }) else {
                return nil
            }
            let hasNetwork = region.wifiSSID != nil || region.wifiBSSID != nil
            let rule: Audience.RegionRule =
                switch region.policy {
                case .circle: .circle
                case .wifi: hasNetwork ? .wifi : .circle
                case .either: hasNetwork ? .either : .circle
                }
            let area: AudienceArea =
                region.polygon.map { .polygon($0.vertices) } ?? .circle(center: region.centre, radius: region.radius)
            return Audience.RegionTarget(storedId: region.id, area: area, rule: rule)
        }

        func poiPositions(matching filter: PlaceFilter, limit: Int) async throws -> [Coordinate]? {
            // An index still loading would answer "no such POI": say so instead (503, retry).
            if let problem = state.placesLoading.problem { throw PlacesStillLoading(problem: problem) }
            return state.index.positions(matching: filter, limit: limit)
        }
    }

    /// Reads `audience` in the request's app (a 400 naming what is wrong), without resolving it.
    static func parse(_ value: JSONValue, state: ServiceState) async throws -> Audience {
        do {
            return try await Audience.parse(value, places: Places(state: state, app: AppScope.current.app))
        } catch let problem as Audience.Problem {
            throw APIError(
                .badRequest, reason: .invalidAudience, message: problem.description,
                details: ["field": .string(problem.path)])
        }
    }

    /// The stored keys of the devices of `app` an audience (its JSON, as a push stored it) holds at `now`: what
    /// the delivery engine's resolve stage calls, in the background. Everyone (an `all` of only `not` parts) is
    /// not listed: the resolve stage reads the app's devices a chunk at a time, less those the `not` parts hold.
    /// Any other audience is listed in ascending order, its set let go before the list is sorted.
    static func members(_ audience: String, app: String, now: Double, state: ServiceState) async throws
        -> AudienceMemberList
    {
        let value = try JSONValue.decode(Data(audience.utf8))
        let parsed = try await Audience.parse(value, places: Places(state: state, app: app))
        let resolver = AudienceResolver(fixes: state.fixes, tags: state.tokens, history: state.location.audienceHistory)
        if case .all(let parts) = parsed, parts.allSatisfy({ if case .not = $0 { true } else { false } }) {
            var removed = Set<String>()
            for case .not(let inner) in parts {
                removed.formUnion(try await resolver.resolve(inner, app: app, now: now))
            }
            return .everyone(except: removed)
        }
        var found = try await resolver.resolve(parsed, app: app, now: now)
        var ids = Array(found)
        found = []
        ids.sort()
        return .listed(ids)
    }

    /// Reads and resolves `audience` in the request's app: the stored keys of its devices.
    static func resolve(_ value: JSONValue, state: ServiceState) async throws -> Set<String> {
        try await parseAndResolve(value, state: state).members
    }

    /// Reads and resolves `audience` in the request's app: what it says and the stored keys of its devices.
    static func parseAndResolve(_ value: JSONValue, state: ServiceState) async throws -> (
        audience: Audience, members: Set<String>
    ) {
        let app = AppScope.current.app
        let audience: Audience
        do {
            audience = try await Audience.parse(value, places: Places(state: state, app: app))
        } catch let problem as Audience.Problem {
            throw APIError(
                .badRequest, reason: .invalidAudience, message: problem.description,
                details: ["field": .string(problem.path)])
        }
        do {
            let members = try await AudienceResolver(
                fixes: state.fixes, tags: state.tokens, history: state.location.audienceHistory
            ).resolve(
                audience, app: app, now: state.clock.now().timeIntervalSince1970)
            return (audience, members)
        } catch let unsupported as AudiencesUnsupported {
            throw APIError(.serviceUnavailable, reason: .internalError, message: unsupported.description)
        }
    }

    struct PreviewView: JSONObjectRepresentable {
        var count: Int
        var sample: [String]
        var milliseconds: Double

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("app", AppScope.current.app)
            object.field("count", count)
            object.field("elapsed_ms", (milliseconds * 1000).rounded() / 1000)
            object.field("sample", strings: sample)
        }
    }

    func register(on router: RouteRecorder) {
        router.post("/v1/audiences/preview", permission: .readOrSend) { request, _ in
            let started = ContinuousClock.now
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            let body = try BodyMembers(
                document, allowed: ["audience", "sample"], shape: "{\"audience\": {...}, \"sample\"?: 20}")
            let audience = try body.required("audience", "the audience, e.g. {\"near\": {...}}")
            var sampleSize = 20
            if let raw = try body.integer("sample") {
                guard (0...Int64(Self.maximumSample)).contains(raw) else {
                    throw body.invalid("sample", "must be an integer from 0 to \(Self.maximumSample)")
                }
                sampleSize = Int(raw)
            }
            let members = try await Self.resolve(audience, state: state)
            let sample = members.map(DeviceRoutes.shown).sorted().prefix(sampleSize)
            let elapsed = Double((ContinuousClock.now - started) / .microseconds(1)) / 1000
            return JSONIO.response(PreviewView(count: members.count, sample: Array(sample), milliseconds: elapsed))
        }
    }
}
