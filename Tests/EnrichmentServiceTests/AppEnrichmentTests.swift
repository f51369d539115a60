import EnrichmentRuntime
import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

/// An app of the apps file with its own enrichment settings: template, places filter, map style.
@Suite("An app's own enrichment settings")
struct AppEnrichmentTests {
    static let courierEnrichment =
        #"{"body_template":"Courier: {{name}} ({{distance_m}} m)","places_types":["depot"],"map_style":"legacy"}"#

    static func poi(_ id: String, _ name: String, type: String, lat: Double, lng: Double) -> String {
        #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"store_id":"\#(id)","name":"\#(name)","types":["\#(type)"]},"geometry":{"type":"Point","coordinates":[\#(lng),\#(lat)]}}]}"#
    }

    @Test(
        "the courier app's template, places types and map style apply to its devices, in /v1/enrich and in its pushes; the consumer app keeps the service's"
    )
    func ownSettings() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("app-enrich-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let appsFile = try AppsTests.writeApps(into: directory)
        var text = try String(contentsOfFile: appsFile, encoding: .utf8)
        text = text.replacingOccurrences(
            of: #""credential": "team-b"}"#,
            with: #""credential": "team-b", "enrichment": \#(Self.courierEnrichment)}"#)
        try text.write(toFile: appsFile, atomically: true, encoding: .utf8)
        let caFile = directory.appendingPathComponent("ca.pem").path
        try authority.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        try await withMock(teams: AppsTests.teams) { sandboxURL, mock in
            try await withService({ configuration in
                configuration.delivery.appsFile = appsFile
                configuration.delivery.caFile = caFile
                configuration.delivery.sandboxURL = sandboxURL
                configuration.delivery.productionURL = sandboxURL
                configuration.loadSamplePOIs = false
            }) { client in
                _ = try await client.post(
                    "/v1/pois", json: Self.poi("cafe", "Cafe Here", type: "cafe", lat: 48.8584, lng: 2.2945))
                _ = try await client.post(
                    "/v1/pois", json: Self.poi("depot", "Depot North", type: "depot", lat: 48.8611, lng: 2.2945))
                let now = Int64(Date().timeIntervalSince1970)
                var bodies: [String: String] = [:]
                var maps: [String: String] = [:]
                for app in ["consumer", "courier"] {
                    let h = ["Enrich-App": app]
                    let fix = try await client.post(
                        "/v1/devices/phone/locations",
                        json: #"{"locations":[{"latitude":48.8584,"longitude":2.2945,"utc_timestamp":\#(now - 5)}]}"#,
                        headers: h)
                    #expect(fix.status == 200)
                    let reply = try await client.post(
                        "/v1/enrich", json: enrichBody(device: "phone", payload: locationPayload(timestamp: "\(now)")),
                        headers: h)
                    bodies[app] = reply.json?["notification"]?["body"]?.stringValue
                    maps[app] = reply.json?["static_map_url"]?.stringValue
                }
                #expect(bodies["consumer"]?.hasPrefix("Cafe Here is") == true, "\(bodies)")
                // The courier's search keeps depots only, and its template says so its own way.
                let courierBody = try #require(bodies["courier"])
                #expect(courierBody.hasPrefix("Courier: Depot North ("), "\(courierBody)")
                #expect(courierBody.hasSuffix(" m)"))
                #expect(maps["consumer"]?.hasPrefix("https://maps.googleapis.com/") == true, "\(maps)")
                #expect(maps["courier"]?.hasPrefix("http://maps.google.com/maps/api/staticmap") == true, "\(maps)")

                // A push through the delivery engine: each app's device gets its app's body.
                let courier = ["Enrich-App": "courier"]
                _ = try await register(client, "phone", deviceToken(0xD1), topic: "com.b", headers: courier)
                let push = try await client.post(
                    "/v1/push", json: pushBody(devices: ["phone"], payload: locationPayload(timestamp: "\(now)")),
                    headers: courier)
                #expect(push.json?["counts"]?["delivered"] == .int(1), "\(push.text)")
                let sent = payloads(mock, token: deviceToken(0xD1))
                #expect(sent.first?["aps"]?["alert"]?["body"]?.stringValue == courierBody, "\(sent)")
            }
        }
    }

    @Test("a bad template, query or style in an app's enrichment stops the start, naming the app")
    func badSettings() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "app-enrich-bad-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(String, String)] = [
            (#"{"body_template":"{{nope}}"}"#, "app 'courier': enrichment template"),
            (#"{"places_query":"type:("}"#, "app 'courier': enrichment places_query"),
            (#"{"map_style":"modern"}"#, "app 'courier': enrichment map_style"),
            (#"{"places_limit":0}"#, "places_limit must be an integer 1-300"),
            (#"{"colour":"red"}"#, "enrichment member 'colour' is unknown"),
        ]
        for (enrichment, expected) in cases {
            let appsFile = try AppsTests.writeApps(into: directory)
            var text = try String(contentsOfFile: appsFile, encoding: .utf8)
            text = text.replacingOccurrences(
                of: #""credential": "team-b"}"#, with: #""credential": "team-b", "enrichment": \#(enrichment)}"#)
            try text.write(toFile: appsFile, atomically: true, encoding: .utf8)
            do {
                _ = try AppsConfiguration.load(path: appsFile)
                Issue.record("accepted: \(enrichment)")
            } catch {
                #expect(error.description.contains(expected), "\(error.description)")
            }
        }
    }
}
