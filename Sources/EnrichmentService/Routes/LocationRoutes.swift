import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird
import LocationCore

/// Visits, zones of interest, events (`/v1/devices/{deviceId}/visits|zois|events`) and custom regions
/// (`/v1/regions`).
struct LocationRoutes {
    let state: ServiceState

    struct VisitsResult: JSONObjectRepresentable {
        var report: LocationEngine.VisitReport

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("accepted", report.accepted.count)
            object.field("accepted_ids", strings: report.accepted.map(\.id))
            object.field("rejected", objects: report.rejected)
            object.field("events", report.events)
        }
    }

    struct VisitList: JSONObjectRepresentable {
        var visits: [Visit]
        func writeJSON(into object: inout JSONObjectWriter) { object.field("visits", objects: visits) }
    }

    struct EventList: JSONObjectRepresentable {
        var events: [LocationEvent]
        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("events", json: .array(events.map(\.appJSON)))
        }
    }

    struct RegionList: JSONObjectRepresentable {
        var regions: [Region]
        func writeJSON(into object: inout JSONObjectWriter) { object.field("regions", objects: regions) }
    }

    /// The request's app's regions, with the ids it knows them by.
    static func visible(_ regions: [Region]) -> [Region] {
        let app = AppScope.current.app
        return regions.compactMap { region in
            guard AppNamespace.app(ofRegion: region.id) == app, let id = AppNamespace.visible(region.id, in: app)
            else { return nil }
            var shown = region
            shown.id = id
            return shown
        }
    }

    struct Deleted: JSONObjectRepresentable {
        var id: String
        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("deleted", true)
            object.field("id", id)
        }
    }

    static func unknownDevice(_ id: String) -> APIError {
        APIError(
            .notFound, reason: .unknownDevice,
            message: "nothing is known of device '\(DeviceRoutes.shown(id))': report locations or visits for it first")
    }

    func register(on router: RouteRecorder) {
        let location = state.location
        let devices = router.group("/v1/devices")
        devices.post(":deviceId/visits") { request, context in
            let id = try DeviceRoutes.deviceId(context)
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            let report = try await location.reportVisits(deviceId: id, document: document)
            return JSONIO.response(VisitsResult(report: report))
        }
        devices.get(":deviceId/visits") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            guard let visits = try await location.visits(deviceId: id) else { throw Self.unknownDevice(id) }
            return JSONIO.response(VisitList(visits: visits))
        }
        devices.get(":deviceId/zois") { _, context in
            let id = try DeviceRoutes.deviceId(context)
            guard let zois = try await location.zois(deviceId: id) else { throw Self.unknownDevice(id) }
            return JSONIO.response(ZOIList(zois))
        }
        devices.get(":deviceId/events") { request, context in
            let id = try DeviceRoutes.deviceId(context)
            var limit = 1000
            if let raw = request.uri.queryParameters.get("limit") {
                guard let value = QueryNumber.integer(raw), (1...10_000).contains(value) else {
                    throw APIError.invalid(
                        .invalidLimit, "limit must be an integer 1-10000 in decimal digits", field: "limit")
                }
                limit = value
            }
            guard let events = try await location.events(deviceId: id, limit: limit) else {
                throw Self.unknownDevice(id)
            }
            return JSONIO.response(EventList(events: events))
        }

        router.post("/v1/regions") { request, _ in
            let document = try await JSONIO.readJSON(request, limit: state.maxBodyBytes)
            let region: Region
            switch Result(catching: { () throws(RegionProblem) in try location.region(from: document) })
            {
            case .success(let value): region = value
            case .failure(let problem):
                throw APIError.invalid(.invalidRegion, problem.description, field: problem.field)
            }
            var stored = region
            stored.id = AppScope.current.key(region.id)
            let created = try await location.putRegion(stored)
            return JSONIO.response(region, status: created ? .created : .ok)
        }
        router.get("/v1/regions") { _, _ in
            JSONIO.response(RegionList(regions: Self.visible(try await location.regions())))
        }
        router.delete("/v1/regions/:regionId") { _, context in
            let raw = try context.parameters.require("regionId")
            let id = raw.removingPercentEncoding ?? raw
            let stored = id.hasPrefix("custom_") ? id : "custom_\(id)"
            guard try await location.deleteRegion(id: AppScope.current.key(stored)) else {
                throw APIError(
                    .notFound, reason: .unknownRegion, message: "no region '\(id)'; GET /v1/regions lists them")
            }
            return JSONIO.response(Deleted(id: stored))
        }
    }
}
