import EnrichmentCore
import Essentials
import Foundation
import Synchronization
import Testing

/// Test double for the fix store (the real one is tested in EnrichmentStorageTests).
final class MemoryFixStore: FixStore {
    let fixes = Mutex<[LocationFix]>([])
    func insert(_ new: [LocationFix]) async throws { fixes.withLock { $0.append(contentsOf: new) } }
    func latestFix(deviceId: String) async throws -> LocationFix? {
        fixes.withLock { $0.filter { $0.deviceId == deviceId }.max { $0.fixTime < $1.fixTime } }
    }
    func deleteDevice(_ deviceId: String) async throws -> Int {
        fixes.withLock { all in
            let before = all.count
            all.removeAll { $0.deviceId == deviceId }
            return before - all.count
        }
    }
    func fixes(deviceId: String, after: Double, before: Double, limit: Int) async throws -> [LocationFix] {
        fixes.withLock { all in
            Array(
                all.filter { $0.deviceId == deviceId && $0.fixTime > after && $0.fixTime < before }.sorted {
                    $0.fixTime < $1.fixTime
                }.prefix(
                    limit))
        }
    }
}

/// Places double that answers with a scripted result.
struct ScriptedPlaces: PlacesProvider {
    let name = "scripted"
    let result: Result<[PlaceMatch], PlacesError>
    var delay: Duration = .zero
    func nearest(to point: Coordinate, query: PlacesQuery) async throws(PlacesError) -> [PlaceMatch] {
        if delay > .zero { try? await Task.sleep(for: delay) }
        return try result.get()
    }
}

/// Places double that answers as the local index does (`answersImmediately`) or as a remote API, with the nearest
/// `query.limit` of its POIs, and remembers the limits it was asked for.
final class LimitRecordingPlaces: PlacesProvider {
    let name = "recording"
    let answersImmediately: Bool
    let matches: [PlaceMatch]
    let limits = Mutex<[Int]>([])

    init(answersImmediately: Bool, matches: [PlaceMatch]) {
        self.answersImmediately = answersImmediately
        self.matches = matches
    }

    func nearest(to point: Coordinate, query: PlacesQuery) async throws(PlacesError) -> [PlaceMatch] {
        limits.withLock { $0.append(query.limit) }
        return Array(matches.prefix(query.limit))
    }
}

@Suite("The enrichment flow")
struct EnricherTests {
    static let now: Int64 = 1_700_000_000
    let user = Coordinate(latitude: 43.6, longitude: 3.88)
    let station = PlaceMatch(
        poi: POI(
            storeId: "s1", name: "Gare Saint-Roch", coordinate: Coordinate(latitude: 43.6048, longitude: 3.8807),
            address: POI.Address(city: "Montpellier", zipcode: "34000")),
        distance: 135.28682936)

    func enricher(
        mode: BodyMode, places: (any PlacesProvider)?, map: Bool, fixAge: Double? = 60,
        deadline: Duration = .seconds(2)
    ) async throws -> Enricher {
        let store = MemoryFixStore()
        if let fixAge {
            try await store.insert([
                LocationFix(
                    deviceId: "d1", coordinate: user, fixTime: Double(Self.now) - fixAge,
                    receivedAt: Double(Self.now))
            ])
        }
        return Enricher(
            settings: EnrichmentSettings(mode: mode, deadline: deadline), fixes: store, places: places,
            map: map ? try StaticMapBuilder(apiKey: "K") : nil, template: try BodyTemplate(),
            clock: FixedWallClock(epochSeconds: Double(Self.now)))
    }

    func payload(timestamp: String = "\(now)", category: String = "location") throws -> NotificationPayload {
        try NotificationPayload(
            data: Data(
                #"{"aps":{"alert":{"title":"Hello","subtitle":"Sub","body":"Original"},"mutable-content":1,"category":"\#(category)","timestamp":\#(timestamp)}}"#
                    .utf8))
    }

    @Test("the answer's payload member is the payload's own bytes; a payload set afterwards is written anew")
    func answerPayloadMember() async throws {
        let places = LimitRecordingPlaces(answersImmediately: true, matches: [station])
        for mode in [BodyMode.default, .woosmap] {
            var result = try await enricher(mode: mode, places: places, map: true).enrich(
                deviceId: "d1", payload: try payload())
            let answer = try JSONValue.decode(Data(result.encodedJSON()))
            #expect(answer["payload"] == result.payload)
            #expect(result.encoded == JSONWriter.bytes(result.payload))
            result.payload = .object(["aps": .object(["alert": .string("replaced")])])
            #expect(result.encoded == nil)
            #expect(try JSONValue.decode(Data(result.encodedJSON()))["payload"] == result.payload)
        }
    }

    @Test("a delivery's enrichment searches only the nearest POI with the local index, and sends the same payload")
    func deliverySearchesNearestOnly() async throws {
        let far = PlaceMatch(
            poi: POI(storeId: "s2", name: "Far", coordinate: Coordinate(latitude: 43.61, longitude: 3.89)),
            distance: 1500)
        for mode in [BodyMode.default, .woosmap] {
            for immediate in [true, false] {
                let places = LimitRecordingPlaces(answersImmediately: immediate, matches: [station, far, far])
                let base = try await enricher(mode: mode, places: places, map: true)
                let full = try await base.enrich(deviceId: "d1", payload: try payload())
                // As the delivery engine hands it: measured and stenciled once per push.
                let delivery = try await base.forDelivery(fixes: base.fixes).enrich(
                    deviceId: "d1", payload: try payload().measured().stenciled())
                #expect(full.pois.count == 3)
                #expect(places.limits.withLock { $0 } == (immediate ? [5, 1] : [5, 5]))
                #expect(delivery.pois.count == (immediate ? 1 : 3))
                #expect(delivery.outcome == full.outcome)
                #expect(delivery.rule == full.rule)
                #expect(delivery.encoded != nil)
                #expect(delivery.encoded == full.encoded)
                #expect(delivery.encoded == JSONWriter.bytes(full.payload))
                #expect(delivery.payload == full.payload)
                #expect(delivery.payloadBytes == full.payloadBytes)
                #expect(delivery.notification.title == full.notification.title)
                #expect(delivery.notification.subtitle == full.notification.subtitle)
                #expect(delivery.notification.body == full.notification.body)
                #expect(delivery.notification.attachmentURL == full.notification.attachmentURL)
                #expect(delivery.bodyTruncated == full.bodyTruncated)
            }
        }
    }

    @Test("a delivery's enrichment takes the device's context from the batch's read, when it reads contexts at all")
    func deliveryContexts() async throws {
        struct OneContext: DeviceContextProvider {
            func context(deviceId: String) async throws -> DeviceContext? {
                DeviceContext(regions: ["custom_store"], region: "store", zone: nil)
            }
        }
        let base = try await enricher(mode: .default, places: ScriptedPlaces(result: .success([station])), map: false)
        let template = try BodyTemplate(poi: "{{name}} near {{region}}")
        let withContexts = Enricher(
            settings: base.settings, fixes: base.fixes, places: base.places, map: nil, template: template,
            clock: base.clock, contexts: OneContext())
        let batch = PrefetchedContexts(["d1": DeviceContext(regions: ["custom_depot"], region: "depot", zone: nil)])
        let own = try await withContexts.enrich(deviceId: "d1", payload: try payload())
        #expect(own.notification.body == "Gare Saint-Roch near store")
        let delivered = try await withContexts.forDelivery(fixes: base.fixes, contexts: batch)
            .enrich(deviceId: "d1", payload: try payload())
        #expect(delivered.notification.body == "Gare Saint-Roch near depot")
        // Without location intelligence no context is read, prefetched or not.
        let without = Enricher(
            settings: base.settings, fixes: base.fixes, places: base.places, map: nil, template: template,
            clock: base.clock)
        let plain = try await without.forDelivery(fixes: base.fixes, contexts: batch)
            .enrich(deviceId: "d1", payload: try payload())
        #expect(
            plain.notification.body
                == (try await without.enrich(deviceId: "d1", payload: try payload())).notification.body)
        #expect(plain.deviceContext == nil)
    }

    @Test("woosmap, places and map: SDK body and a two-marker attachment")
    func woosmapPlacesAndMap() async throws {
        let result = try await enricher(mode: .woosmap, places: ScriptedPlaces(result: .success([station])), map: true)
            .enrich(deviceId: "d1", payload: payload())
        #expect(result.outcome == .enriched)
        #expect(result.notification.body == "City = Montpellier \nZipCode = 34000 \nDistance = 135.28682936")
        #expect(result.notification.title == "Hello")
        #expect(result.notification.subtitle == "Sub")
        #expect(
            result.notification.attachmentURL?.contains(
                "markers=color:red%7C43.600000,3.880000&markers=color:blue%7C43.6048,3.8807") == true)
        #expect(result.payload["attachment-url"] == .string(result.staticMapURL!))
    }

    @Test("the preview's view is the same from the typed result as from its JSON, and the page renders it")
    func previewViewFromTypedResult() async throws {
        let result = try await enricher(mode: .default, places: ScriptedPlaces(result: .success([station])), map: true)
            .enrich(deviceId: "d1", payload: payload())
        let typed = PreviewPage.View(result)
        let fromJSON = PreviewPage.View(json: try JSONValue.decode(Data(result.encodedJSON())))
        #expect(typed == fromJSON)
        #expect(typed.places.map(\.name) == ["Gare Saint-Roch"])
        #expect(typed.fix == Coordinate(latitude: 43.6, longitude: 3.88))
        #expect(typed.outcome == "enriched")
        let page = PreviewPage.render(typed, context: PreviewPage.Context(deviceId: "d1", payloadText: "{}"))
        #expect(page.contains("id=\"map\""))
        #expect(page.contains("Gare Saint-Roch · 140 m"))
    }

    @Test("woosmap, places only")
    func woosmapPlacesOnly() async throws {
        let result = try await enricher(mode: .woosmap, places: ScriptedPlaces(result: .success([station])), map: false)
            .enrich(deviceId: "d1", payload: payload())
        #expect(
            result.notification.body
                == "myLatitude = 43.600000 \nmyLongitude = 3.880000 \nCity = Montpellier \nZipCode = 34000 \nDistance = 135.28682936"
        )
        #expect(result.staticMapURL == nil)
        #expect(result.payload["attachment-url"] == nil)
    }

    @Test("woosmap, map only: location lines plus a one-marker map")
    func woosmapMapOnly() async throws {
        let result = try await enricher(mode: .woosmap, places: nil, map: true).enrich(
            deviceId: "d1", payload: payload())
        #expect(result.notification.body == "myLatitude = 43.600000 \nmyLongitude = 3.880000")
        #expect(result.staticMapURL?.contains("markers=color:blue%7C43.600000,3.880000&zoom=15") == true)
    }

    @Test("woosmap, neither: location lines, no map")
    func woosmapNeither() async throws {
        let result = try await enricher(mode: .woosmap, places: nil, map: false).enrich(
            deviceId: "d1", payload: payload())
        #expect(result.notification.body == "myLatitude = 43.600000 \nmyLongitude = 3.880000")
        #expect(result.staticMapURL == nil)
    }

    @Test("woosmap: stale is OUT OF TIME, missing is No timestamp, title untouched")
    func woosmapStaleness() async throws {
        let e = try await enricher(mode: .woosmap, places: ScriptedPlaces(result: .success([station])), map: true)
        let stale = try await e.enrich(deviceId: "d1", payload: payload(timestamp: "\(Self.now - 301)"))
        #expect(stale.outcome == .stale)
        #expect(stale.notification.body == "OUT OF TIME")
        #expect(stale.notification.title == "Hello")
        #expect(stale.staticMapURL == nil)
        let fresh = try await e.enrich(deviceId: "d1", payload: payload(timestamp: "\(Self.now - 300)"))
        #expect(fresh.outcome == .enriched)
        let missing = try await e.enrich(deviceId: "d1", payload: payload(timestamp: "\"\(Self.now)\""))
        #expect(missing.outcome == .noTimestamp)
        #expect(missing.notification.body == "No timestamp")
    }

    @Test("the timestamp is checked before the category")
    func timestampFirst() async throws {
        let e = try await enricher(mode: .woosmap, places: nil, map: false)
        let result = try await e.enrich(deviceId: "d1", payload: payload(timestamp: "1", category: "promo"))
        #expect(result.outcome == .stale)
        #expect(result.notification.body == "OUT OF TIME")
        let fresh = try await e.enrich(deviceId: "d1", payload: payload(category: "promo"))
        #expect(fresh.outcome == .unchanged)
        #expect(fresh.rule == "category_not_location")
        #expect(fresh.notification.body == "Original")
    }

    @Test("woosmap: places HTTP error gives Error Search API <status>")
    func woosmapSearchError() async throws {
        let result = try await enricher(
            mode: .woosmap, places: ScriptedPlaces(result: .failure(.httpStatus(500))), map: true
        )
        .enrich(deviceId: "d1", payload: payload())
        #expect(result.outcome == .degraded)
        #expect(result.notification.body == "Error Search API 500")
        #expect(result.degraded?.reason == "upstream_status")
    }

    @Test("no POI found: body unchanged, one-marker map")
    func noPOI() async throws {
        let result = try await enricher(mode: .woosmap, places: ScriptedPlaces(result: .success([])), map: true)
            .enrich(deviceId: "d1", payload: payload())
        #expect(result.outcome == .noPOI)
        #expect(result.notification.body == "Original")
        #expect(result.staticMapURL?.contains("zoom=15") == true)
    }

    @Test("default mode: human body; stale keeps the original body")
    func defaultMode() async throws {
        let e = try await enricher(mode: .default, places: ScriptedPlaces(result: .success([station])), map: true)
        let result = try await e.enrich(deviceId: "d1", payload: payload())
        #expect(result.notification.body == "Gare Saint-Roch is 140 m away in Montpellier")
        let stale = try await e.enrich(deviceId: "d1", payload: payload(timestamp: "\(Self.now - 301)"))
        #expect(stale.outcome == .stale)
        #expect(stale.notification.body == "Original")
    }

    @Test("no fix, and a fix older than the max age, deliver the original content")
    func noFix() async throws {
        let none = try await enricher(mode: .default, places: nil, map: true, fixAge: nil).enrich(
            deviceId: "d1", payload: payload())
        #expect(none.outcome == .noFix)
        #expect(none.rule == "no_fix_reported")
        #expect(none.notification.body == "Original")
        let old = try await enricher(mode: .default, places: nil, map: true, fixAge: 3601).enrich(
            deviceId: "d1", payload: payload())
        #expect(old.outcome == .noFix)
        #expect(old.rule == "fix_too_old")
        #expect(old.fix?.ageSeconds == 3601)
        let edge = try await enricher(mode: .default, places: nil, map: true, fixAge: 3600).enrich(
            deviceId: "d1", payload: payload())
        #expect(edge.outcome == .enriched)
    }

    @Test("a slow provider is cut off at the deadline and the result is degraded")
    func deadline() async throws {
        let slow = ScriptedPlaces(result: .success([station]), delay: .seconds(60))
        let e = try await enricher(mode: .default, places: slow, map: true, deadline: .milliseconds(100))
        let started = ContinuousClock.now
        let result = try await e.enrich(deviceId: "d1", payload: payload())
        // Far below the provider's 60 s: the deadline, not the provider, ended the wait (slack for loaded CI machines).
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(result.outcome == .degraded)
        #expect(result.degraded?.reason == "upstream_timeout")
        #expect(result.notification.body == "You are near 43.60000, 3.88000")
    }

    @Test("a push without mutable-content is delivered as is")
    func notMutable() async throws {
        let p = try NotificationPayload(
            data: Data(#"{"aps":{"alert":"hi","category":"location","timestamp":\#(Self.now)}}"#.utf8))
        let result = try await enricher(mode: .woosmap, places: nil, map: false).enrich(deviceId: "d1", payload: p)
        #expect(result.outcome == .unchanged)
        #expect(result.rule == "mutable_content_missing")
    }

    @Test("the legacy shape is enriched in default mode and flagged")
    func legacyShape() async throws {
        let p = try NotificationPayload(
            data: Data(
                #"{"location":"1","timestamp":"\#(Self.now)","aps":{"alert":{"body":"x"},"mutable-content":1}}"#.utf8))
        let result = try await enricher(mode: .default, places: ScriptedPlaces(result: .success([station])), map: false)
            .enrich(deviceId: "d1", payload: p)
        #expect(result.outcome == .enriched)
        #expect(result.legacyShape)
        #expect(result.staleness?.source == .legacyTopLevel)
    }

    @Test("an input payload over 4096 bytes is refused")
    func oversizeInput() async throws {
        let p = try NotificationPayload(
            json: .object(["aps": .object(["alert": .string("a")]), "x": .string(String(repeating: "y", count: 4100))]))
        await #expect(throws: PayloadError.self) {
            try await enricher(mode: .default, places: nil, map: false).enrich(deviceId: "d1", payload: p)
        }
    }

    @Test("an enriched payload never exceeds 4096 bytes")
    func outputLimit() async throws {
        var long = station
        long.poi.name = String(repeating: "Long name ", count: 500)
        let result = try await enricher(mode: .default, places: ScriptedPlaces(result: .success([long])), map: true)
            .enrich(deviceId: "d1", payload: payload())
        #expect(result.bodyTruncated)
        #expect(result.payloadBytes <= 4096)
        #expect(result.payload.encodedData().count == result.payloadBytes)
    }
}
