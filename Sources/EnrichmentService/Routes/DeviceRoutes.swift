import EnrichmentCore
import Foundation
import Hummingbird

/// Location reports and per-device data: `/v1/devices/{deviceId}/...`.
struct DeviceRoutes {
    let state: ServiceState

    struct IngestResult: Encodable {
        var accepted: Int
        var rejected: [OpenLocateBatch.Rejection]
    }

    struct FixView: Encodable {
        var deviceId: String
        var latitude: Double
        var longitude: Double
        var utcTimestamp: Double
        var horizontalAccuracy: Double?
        var locationContext: String?
        var receivedAt: Double
        var ageSeconds: Double

        enum CodingKeys: String, CodingKey {
            case latitude, longitude
            case deviceId = "device_id", utcTimestamp = "utc_timestamp", horizontalAccuracy = "horizontal_accuracy"
            case locationContext = "location_context", receivedAt = "received_at", ageSeconds = "age_seconds"
        }
    }

    struct DeleteResult: Encodable {
        var deviceId: String
        var deletedFixes: Int
        enum CodingKeys: String, CodingKey { case deviceId = "device_id", deletedFixes = "deleted_fixes" }
    }

    static func deviceId(_ context: ServiceContext) throws -> String {
        let raw = try context.parameters.require("deviceId")
        // Path segments arrive percent-encoded (`a%3Ab` is `a:b`); the id is checked once decoded.
        guard let id = raw.removingPercentEncoding else {
            throw APIError.invalid("invalid_device_id", "device id '\(raw)' is not valid percent-encoding", field: "deviceId")
        }
        if let problem = DeviceID.problem(with: id) { throw APIError.invalid("invalid_device_id", problem, field: "deviceId") }
        return id
    }

    func register(on router: RouteRecorder) {
        let devices = router.group("/v1/devices")
        devices.post(":deviceId/locations") { request, context in
            let id = try Self.deviceId(context)
            let document = try await JSONIO.readJSON(request, limit: state.configuration.maxBodyBytes)
            let batch = try OpenLocateBatch.parse(document, deviceId: id, receivedAt: state.clock.now().timeIntervalSince1970)
            // Stored (and committed) before we acknowledge: an accepted fix is never lost.
            try await state.fixes.insert(batch.accepted)
            state.metrics.fixes(accepted: batch.accepted.count, rejected: batch.rejected.count)
            let status: HTTPResponse.Status = batch.accepted.isEmpty && !batch.rejected.isEmpty ? .unprocessableContent : .ok
            return try JSONIO.response(IngestResult(accepted: batch.accepted.count, rejected: batch.rejected), status: status)
        }
        devices.get(":deviceId/location") { _, context in
            let id = try Self.deviceId(context)
            guard let fix = try await state.fixes.latestFix(deviceId: id) else {
                throw APIError(.notFound, reason: "no_fix", message: "no location has been reported for device '\(id)'")
            }
            return try JSONIO.response(FixView(
                deviceId: id, latitude: fix.coordinate.latitude, longitude: fix.coordinate.longitude,
                utcTimestamp: fix.fixTime, horizontalAccuracy: fix.horizontalAccuracy, locationContext: fix.context,
                receivedAt: fix.receivedAt, ageSeconds: state.clock.now().timeIntervalSince1970 - fix.fixTime))
        }
        devices.delete(":deviceId") { _, context in
            let id = try Self.deviceId(context)
            let removed = try await state.fixes.deleteDevice(id)
            return try JSONIO.response(DeleteResult(deviceId: id, deletedFixes: removed))
        }
    }
}
