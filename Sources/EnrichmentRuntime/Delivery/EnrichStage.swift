import APNsCore
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import Logging
import NIOCore
import Synchronization
import Tracing

/// The enrich stage: each (push, device) of a batch gets its own payload at the moment it is sent (so the staleness
/// rule is judged then), with the batch's fixes and contexts read in one look each.
struct EnrichStage: Sendable {
    let context: PipelineContext
    let enricher: Enricher
    /// Apps with their own enrichment settings: their deliveries are enriched with these.
    let appEnrichers: [String: Enricher]

    /// What one device of a push is sent, and the places provider that enriched it (nil: sent as it is).
    typealias Prepared = (bytes: [UInt8], verdict: DeliveryPlanner.Verdict, provider: String?)

    /// Every claimed device's last fix in one read, so enriching the batch makes no trip to storage per device.
    func prefetch(_ claimed: [ClaimedDelivery]) async throws -> PrefetchedFixes {
        let deviceIds = claimed.map(\.delivery.deviceId)
        return PrefetchedFixes(try await context.bounded { try await enricher.fixes.latestFixes(deviceIds: deviceIds) })
    }

    /// Enriches each (push, device) to be sent, by group, with the prefetched fixes; the enrichments are counted by
    /// outcome and places provider.
    func enrich(
        _ work: [(group: Int, push: PushDefinition, deviceId: String)], fixes prefetched: PrefetchedFixes
    ) async -> [Int: Result<Prepared, any Error>] {
        // The contexts (location intelligence) of the devices to be enriched with a fix, in one look too, as an
        // enrichment reads a context only with a usable fix; a nicety: a look that fails leaves them unknown (each
        // enrichment then reads its own, and a failure there never fails it).
        var contexts: PrefetchedContexts?
        if let provider = enricher.contexts {
            let wanted = work.filter { $0.push.enrich && prefetched.has($0.deviceId) }.map(\.deviceId)
            do {
                contexts = PrefetchedContexts(
                    try await context.bounded { try await provider.contexts(deviceIds: wanted) })
            } catch {
                context.logger.debug("device contexts not read for the batch", metadata: ["error": "\(error)"])
            }
        }
        let batchEnricher = enricher.forDelivery(fixes: prefetched, contexts: contexts)
        // An app with its own enrichment settings: the same prefetched fixes, its templates and places search.
        let batchApps = appEnrichers.mapValues { $0.forDelivery(fixes: prefetched, contexts: contexts) }
        let prepared = await prepareAll(work, with: batchEnricher, apps: batchApps)
        if let observer = context.observer {
            var tally: [EnrichmentResultKey: Int] = [:]
            for case .success(let prepared) in prepared.values {
                guard let provider = prepared.provider else { continue }
                tally[EnrichmentResultKey(outcome: prepared.verdict.outcome, provider: provider), default: 0] += 1
            }
            for (key, count) in tally { observer.enriched(count, outcome: key.outcome, provider: key.provider) }
        }
        return prepared
    }

    /// An enrichment's result as the metrics count it.
    struct EnrichmentResultKey: Hashable {
        var outcome: String
        var provider: String
    }

    /// Enriches each (push, device) of a batch: one after another when places answer at once (the local index),
    /// else up to 32 at a time, so a remote places API's latency is not paid once per device in turn.
    func prepareAll(
        _ work: [(group: Int, push: PushDefinition, deviceId: String)], with base: Enricher,
        apps: [String: Enricher]
    ) async -> [Int: Result<Prepared, any Error>] {
        var results: [Int: Result<Prepared, any Error>] = Dictionary(minimumCapacity: work.count)
        let enricherOf: @Sendable (String) -> Enricher = { AppNamespace.pick($0, base: base, byApp: apps) }
        let enricher = base
        // Each push's payload read once for all its devices: measured, to be enriched (one that cannot be read
        // fails each device's enrichment as before), or written, when it is sent as it is.
        var payloads: [String: NotificationPayload] = [:]
        var plain: [String: [UInt8]] = [:]
        var devices: [String: Int] = [:]
        for (_, push, _) in work { devices[push.id, default: 0] += 1 }
        var read = Set<String>()
        for (_, push, _) in work where read.insert(push.id).inserted {
            if push.enrich {
                // The stencil (two writes of the document) pays from a push's second device in the batch on.
                let payload = try? NotificationPayload(json: push.payload).measured()
                payloads[push.id] = devices[push.id, default: 0] > 1 ? payload?.stenciled() : payload
            } else {
                plain[push.id] = JSONWriter.bytes(push.payload)
            }
        }
        let (parsed, written) = (payloads, plain)
        if enricher.places?.answersImmediately ?? true {
            for (group, push, deviceId) in work {
                do {
                    results[group] = .success(
                        try await prepare(
                            push, parsed: parsed[push.id], written: written[push.id], deviceId: deviceId,
                            with: enricherOf(deviceId)))
                } catch {
                    results[group] = .failure(error)
                }
            }
            return results
        }
        await withTaskGroup(of: (Int, Result<Prepared, any Error>).self) { group in
            var next = 0
            func add() {
                guard next < work.count else { return }
                let (index, push, deviceId) = work[next]
                next += 1
                group.addTask {
                    do {
                        return (
                            index,
                            .success(
                                try await prepare(
                                    push, parsed: parsed[push.id], written: written[push.id], deviceId: deviceId,
                                    with: enricherOf(deviceId)))
                        )
                    } catch { return (index, .failure(error)) }
                }
            }
            for _ in 0..<32 { add() }
            for await (index, result) in group {
                results[index] = result
                add()
            }
        }
        return results
    }

    /// The payload bytes a device gets, with the enrichment's outcome and rule (`parsed` and `written`: the push's
    /// payload read or written once for the batch).
    func prepare(
        _ push: PushDefinition, parsed: NotificationPayload?, written: [UInt8]?, deviceId: String,
        with enricher: Enricher
    ) async throws -> Prepared {
        guard push.enrich else {
            return (
                written ?? JSONWriter.bytes(push.payload),
                .init(outcome: EnrichmentResult.Outcome.unchanged.rawValue, rule: "enrichment_off"), nil
            )
        }
        let payload = try parsed ?? NotificationPayload(json: push.payload)
        let result = try await enricher.enrich(deviceId: deviceId, payload: payload, mode: push.mode)
        return (
            result.encoded ?? JSONWriter.bytes(result.payload),
            .init(outcome: result.outcome.rawValue, rule: result.rule), result.placesProvider ?? "none"
        )
    }
}
