import Delivery
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import Hummingbird
import LocationCore
import Logging
import Tracing

/// Location reports and per-device data: `/v1/devices/{deviceId}/...`.
struct DeviceRoutes {
    let state: ServiceState

    struct IngestResult: JSONObjectRepresentable {
        var accepted: Int
        var rejected: [OpenLocateBatch.Rejection]
        /// Location events the batch raised (region and zone enter/exit, detected visits).
        var events: Int?
        /// Why location intelligence could not evaluate the batch (the fixes are stored regardless).
        var locationError: String?

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("accepted", accepted)
            object.field("rejected", objects: rejected)
            object.field("events", events.map { Int64($0) })
            object.field("location_error", locationError)
        }
    }

    struct FixView: JSONObjectRepresentable {
        var deviceId: String
        var fix: LocationFix
        var ageSeconds: Double

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("age_seconds", ageSeconds)
            object.field("device_id", DeviceRoutes.shown(deviceId))
            object.field("horizontal_accuracy", fix.horizontalAccuracy)
            object.field("latitude", fix.coordinate.latitude)
            object.field("location_context", fix.context)
            object.field("longitude", fix.coordinate.longitude)
            object.field("received_at", fix.receivedAt)
            object.field("utc_timestamp", fix.fixTime)
            if case .object(let extras)? = fix.extras {
                for (key, value) in extras.sorted(by: { $0.key < $1.key }) { object.field(key, json: value) }
            }
        }
    }

    struct DeleteResult: JSONObjectRepresentable {
        var deviceId: String
        var deletedFixes: Int
        var deletedTokens: Int
        var deletedActivityTokens: Int
        var deletedLocationRecords: Int
        var deletedPushRecords: Int

        func writeJSON(into object: inout JSONObjectWriter) {
            object.field("deleted_activity_tokens", deletedActivityTokens)
            object.field("deleted_fixes", deletedFixes)
            object.field("deleted_location_records", deletedLocationRecords)
            object.field("deleted_push_records", deletedPushRecords)
            object.field("deleted_tokens", deletedTokens)
            object.field("device_id", DeviceRoutes.shown(deviceId))
        }
    }

    static func deviceId(_ context: ServiceContext) throws -> String {
        let raw = try context.parameters.require("deviceId")
        // Path segments arrive percent-encoded (`a%3Ab` is `a:b`); the id is checked once decoded.
        guard let id = raw.removingPercentEncoding else {
            throw APIError.invalid(
                .invalidDeviceID, "device id '\(raw)' is not valid percent-encoding", field: "deviceId")
        }
        if let problem = DeviceID.problem(with: id) {
            throw APIError.invalid(.invalidDeviceID, problem, field: "deviceId")
        }
        // Stored under the request's app (`AppNamespace`): another app's device of the same id is another device.
        return AppScope.current.key(id)
    }

    /// A stored device key as its app knows it (for answers and messages).
    static func shown(_ key: String) -> String { AppNamespace.id(of: key) }

    func register(on router: RouteRecorder) {
        let devices = router.group("/v1/devices")
        devices.post(":deviceId/locations") { request, context in
            let id = try Self.deviceId(context)
            let body = try await JSONIO.readJSONBody(request, limit: state.maxBodyBytes)
            let batch: OpenLocateBatch
            do {
                // Read from the bytes, item by item: no JSON tree of a hundred fixes made and thrown away.
                batch = try OpenLocateBatch.parse(
                    json: body, deviceId: id, receivedAt: state.clock.now().timeIntervalSince1970)
            } catch let error as JSONParseError {
                throw JSONIO.invalidJSON(error)
            }
            // Stored (and committed) before we acknowledge: an accepted fix is never lost. Reports arriving
            // together are stored in one statement and evaluated in one transaction (`FixIntake`).
            var outcome = FixIntake.Outcome(events: 0)
            if !batch.accepted.isEmpty {
                outcome = try await state.enricher.spans.run("fixes.ingest") { span in
                    span?.attributes["fixes.count"] = batch.accepted.count
                    return try await state.intake.submit(deviceId: id, fixes: batch.accepted)
                }
            }
            state.metrics.fixes(accepted: batch.accepted.count, rejected: batch.rejected.count)
            let status: HTTPResponse.Status =
                batch.accepted.isEmpty && !batch.rejected.isEmpty ? .unprocessableContent : .ok
            return JSONIO.response(
                IngestResult(
                    accepted: batch.accepted.count, rejected: batch.rejected, events: outcome.events,
                    locationError: outcome.locationError), status: status)
        }
        devices.get(":deviceId/location") { _, context in
            let id = try Self.deviceId(context)
            guard let fix = try await state.fixes.latestFix(deviceId: id) else {
                throw APIError(
                    .notFound, reason: .noFix, message: "no location has been reported for device '\(Self.shown(id))'")
            }
            return JSONIO.response(
                FixView(deviceId: id, fix: fix, ageSeconds: state.clock.now().timeIntervalSince1970 - fix.fixTime))
        }
        devices.delete(":deviceId") { _, context in
            let id = try Self.deviceId(context)
            let removed = try await state.fixes.deleteDevice(id)
            let tokens = try await state.tokens.removeDevice(id)
            let activityTokens = try await state.activities.removeDevice(id)
            let location = try await state.location.store.deleteLocationData(deviceId: id)
            // Its part in pushes: deliveries (scheduled ones too), its place in each push's devices, receipts.
            let pushRecords = try await state.delivery.outbox.deleteDevice(id)
            return JSONIO.response(
                DeleteResult(
                    deviceId: id, deletedFixes: removed, deletedTokens: tokens, deletedActivityTokens: activityTokens,
                    deletedLocationRecords: location, deletedPushRecords: pushRecords))
        }
    }
}
