import Essentials
import Foundation

/// The result being assembled; `finish` writes the body and attachment and enforces the size limit.
struct Draft {
    let mode: BodyMode
    let payload: NotificationPayload
    let now: Date
    var body: String?
    var mapURL: String?
    var staleness: StalenessVerdict?
    var legacyShape = false
    var fix: EnrichmentResult.FixUsed?
    var pois: [EnrichmentResult.POIUsed] = []
    var placesProvider: String?
    var degraded: EnrichmentResult.Degradation?
    var placesMilliseconds: Double?
    var deviceContext: DeviceContext?
    var rules: StalenessPolicy?
    var hints: [String] = []
    /// The device's position, once its fix is known to be usable.
    var user = Coordinate(latitude: 0, longitude: 0)

    init(mode: BodyMode, payload: NotificationPayload, now: Date) {
        self.mode = mode
        self.payload = payload
        self.now = now
    }

    func finish(_ outcome: EnrichmentResult.Outcome, rule: String) throws -> EnrichmentResult {
        // A push's payload with its stencil (a delivery): the document is the stencil's pieces around this body and
        // map URL, when they fit; else it is written in full below (and the body shortened).
        if let body, let stencil = payload.stencil,
            let encoded = stencil.render(body: body, attachment: mapURL, limit: NotificationPayload.maximumSize)
        {
            let alert = payload.alert
            return EnrichmentResult(
                outcome: outcome, rule: rule, mode: mode, staleness: staleness, legacyShape: legacyShape,
                payloadSource: .edited(payload, body: body, attachment: mapURL), payloadBytes: encoded.count,
                encoded: encoded, bodyTruncated: false,
                // The body replaces the alert's (or becomes the alert, when it was a string): the title and
                // subtitle are the push's own.
                notification: .init(
                    title: alert.title, subtitle: alert.subtitle, body: body, attachmentURL: mapURL),
                fix: fix, pois: pois, staticMapURL: mapURL, placesProvider: placesProvider, degraded: degraded,
                evaluatedAt: now.timeIntervalSince1970, placesMilliseconds: placesMilliseconds,
                deviceContext: deviceContext, rules: rules, hints: hints)
        }
        var output = payload
        if let mapURL { output = output.setting(Enricher.attachmentKey, to: .string(mapURL)) }
        var truncated = false
        let encoded: [UInt8]
        if let body {
            (output, truncated, encoded) = try PayloadFitter.fitEncoded(body: body, into: output)
        } else {
            encoded = JSONWriter.bytes(output.json)
        }
        let alert = output.alert
        return EnrichmentResult(
            outcome: outcome, rule: rule, mode: mode, staleness: staleness, legacyShape: legacyShape,
            payloadSource: .document(output.json), payloadBytes: encoded.count, encoded: encoded,
            bodyTruncated: truncated,
            notification: .init(
                title: alert.title, subtitle: alert.subtitle, body: alert.body,
                attachmentURL: mapURL),
            fix: fix, pois: pois, staticMapURL: mapURL, placesProvider: placesProvider, degraded: degraded,
            evaluatedAt: now.timeIntervalSince1970, placesMilliseconds: placesMilliseconds,
            deviceContext: deviceContext, rules: rules, hints: hints)
    }
}
