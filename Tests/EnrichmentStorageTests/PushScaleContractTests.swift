import APNsCore
import Delivery
import EnrichmentCore
import Essentials
import Foundation
import TestSupport
import Testing

private func scalePush(_ id: String, devices: [String] = [], at time: Double = 1000, app: String? = nil)
    -> PushDefinition
{
    PushDefinition(
        id: id, createdAt: time, payload: .object(["aps": .object(["alert": .string("hi")])]), pushType: .alert,
        priority: .immediately, deviceIds: devices, app: app)
}

private func newDelivery(_ device: String, _ token: String, at: Double? = nil) -> NewDelivery {
    NewDelivery(
        deviceId: device, token: token, topic: "com.example.app", environment: .sandbox,
        apnsId: UUID().uuidString.lowercased(), scheduledAt: at)
}

/// The device-level figures written out from every delivery row (what `PushSummary` said before counts were kept):
/// the reference the kept counts must equal.
private func devicesFromRows(_ report: PushReport) -> [DeliveryState: Int] {
    var byDevice: [String: Set<DeliveryState>] = [:]
    for delivery in report.deliveries { byDevice[delivery.deviceId, default: []].insert(delivery.state) }
    var counts: [DeliveryState: Int] = [:]
    for states in byDevice.values {
        let state: DeliveryState =
            states.contains(.delivered)
            ? .delivered
            : states.contains(.pending)
                ? .pending : states.contains(.failed) ? .failed : states.contains(.expired) ? .expired : .cancelled
        counts[state, default: 0] += 1
    }
    return counts
}

@Suite("Pushes at scale: kept counts, resolution, cancel, retention, deletion (store contract)")
struct PushScaleContractTests {
    @Test(
        "the kept counts equal the rows' after enqueue, answers, retries and receipts, a device with two tokens counted once",
        arguments: DeliveryStoreKind.allCases)
    func countsMatchRows(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        let devices = (0..<40).map { "d\($0)" }
        var deliveries: [NewDelivery] = []
        for (index, device) in devices.enumerated() where index % 10 != 9 {
            deliveries.append(newDelivery(device, "t\(index)a"))
            if index % 7 == 0 { deliveries.append(newDelivery(device, "t\(index)b")) }
        }
        let notSent = devices.enumerated().filter { $0.offset % 10 == 9 }.map {
            DeviceOutcome(
                deviceId: $0.element, outcome: "not_sent", rule: $0.offset % 20 == 9 ? "capped" : "no_active_token")
        }
        try await outbox.enqueue(scalePush("p", devices: devices), outcomes: notSent, deliveries: deliveries)
        // Answers of every kind, in three batches, one a retry (pending again) and one for a claim not held.
        var claimed = try await outbox.claim(owner: "w", limit: 1_000, now: 2000, lease: 60)
        #expect(claimed.count == deliveries.count)
        var updates: [DeliveryUpdate] = []
        for (index, claim) in claimed.enumerated() {
            let state: DeliveryState = [.delivered, .failed, .pending, .expired, .delivered][index % 5]
            updates.append(
                DeliveryUpdate(
                    id: claim.id, state: state, attempts: 1, nextAttemptAt: state == .pending ? 2001 : nil,
                    status: state == .pending ? 429 : 200, reason: state == .pending ? "TooManyRequests" : nil,
                    finishedAt: state == .pending ? nil : 2000))
        }
        #expect(try await outbox.complete(Array(updates.prefix(10)), owner: "w") == 10)
        #expect(try await outbox.complete(Array(updates.dropFirst(10)), owner: "other") == 0)
        #expect(try await outbox.complete(Array(updates.dropFirst(10)), owner: "w") == updates.count - 10)
        // The retried ones are claimed again and delivered.
        claimed = try await outbox.claim(owner: "w", limit: 1_000, now: 3000, lease: 60)
        #expect(!claimed.isEmpty)
        _ = try await outbox.complete(
            claimed.map { DeliveryUpdate(id: $0.id, state: .delivered, attempts: 2, status: 200, finishedAt: 3000) },
            owner: "w")
        #expect(try await outbox.confirm(pushId: "p", deviceId: "d0", at: 3001) == .recorded)
        #expect(try await outbox.confirm(pushId: "p", deviceId: "d0", at: 3002) == .already)

        let status = try #require(try await outbox.status(pushId: "p", now: 3000))
        let report = try #require(try await outbox.report(pushId: "p"))
        #expect(status.counts.deliveries == report.counts)
        #expect(status.counts.matched == devices.count)
        #expect(status.counts.notSent == ["capped": 2, "no_active_token": 2])
        let fromRows = devicesFromRows(report)
        for state in DeliveryState.allCases {
            #expect(status.counts.devices[state, default: 0] == fromRows[state, default: 0], "\(state)")
        }
        #expect(status.counts.confirmed == 1)
        #expect(try await outbox.confirmedCount(pushId: "p") == 1)
        #expect(try await outbox.pendingCount(pushId: "p") == report.counts[.pending])
        #expect(status.isDone == (report.counts[.pending] == 0))
    }

    @Test(
        "an audience resolves chunk by chunk behind a cursor; a lost lease commits nothing; another owner goes on",
        arguments: DeliveryStoreKind.allCases)
    func resolutionChunks(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        try await outbox.beginPush(scalePush("r", app: "default"), audience: #"{"all":[]}"#, defaultZone: nil)
        #expect(try await outbox.status(pushId: "r", now: 1000)?.resolving == true)
        #expect(try await outbox.pendingCount(pushId: "r") == 1)
        let first = try await outbox.claimResolution(owner: "a", now: 1000, lease: 60, limit: 5)
        #expect(first.map(\.push.id) == ["r"])
        #expect(first.first?.through == nil)
        #expect(first.first?.audience == #"{"all":[]}"#)
        // Held: nobody else takes it.
        #expect(try await outbox.claimResolution(owner: "b", now: 1010, lease: 60, limit: 5).isEmpty)
        func chunk(_ ids: [String], last: Bool) -> ResolvedChunk {
            ResolvedChunk(
                pushId: "r", deviceIds: ids, outcomes: [],
                deliveries: ids.map { newDelivery($0, "tok-\($0)") }, through: ids.last ?? "", last: last, cap: nil,
                app: "default")
        }
        #expect(try await outbox.enqueueChunk(chunk(["a1", "a2"], last: false), owner: "a", leaseUntil: 1070) == [])
        // Not the holder: nothing is committed.
        #expect(try await outbox.enqueueChunk(chunk(["a3"], last: false), owner: "b", leaseUntil: 1070) == nil)
        #expect(try await outbox.status(pushId: "r", now: 1000)?.counts.matched == 2)
        // The lease runs out (a node died): another owner takes it from the cursor.
        let second = try await outbox.claimResolution(owner: "b", now: 1071, lease: 60, limit: 5)
        #expect(second.first?.through == "a2")
        #expect(second.first?.matched == 2)
        #expect(try await outbox.enqueueChunk(chunk(["a3"], last: false), owner: "a", leaseUntil: 1200) == nil)
        #expect(try await outbox.enqueueChunk(chunk(["a3", "a4"], last: true), owner: "b", leaseUntil: 1200) == [])
        let status = try #require(try await outbox.status(pushId: "r", now: 1100))
        #expect(status.resolving == false)
        #expect(status.counts.matched == 4)
        #expect(status.counts.pending == 4)
        #expect(try await outbox.claimResolution(owner: "c", now: 5000, lease: 60, limit: 5).isEmpty)
        // Positions run on across chunks: the report lists the devices in resolution order.
        #expect(try await outbox.report(pushId: "r")?.devices.map(\.deviceId) == ["a1", "a2", "a3", "a4"])
    }

    @Test(
        "a cancel marks the push at once: claims say so, resolution stops, the sweep cancels and counts",
        arguments: DeliveryStoreKind.allCases)
    func cancelAndSweep(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        let devices = (0..<30).map { "c\($0)" }
        try await outbox.enqueue(
            scalePush("c", devices: devices), outcomes: [], deliveries: devices.map { newDelivery($0, "t-\($0)") })
        let held = try await outbox.claim(owner: "w", limit: 5, now: 2000, lease: 60)
        #expect(held.allSatisfy { !$0.cancelled })
        #expect(try await outbox.markCancelled(pushId: "c", at: 2001))
        #expect(try await outbox.markCancelled(pushId: "nope", at: 2001) == false)
        #expect(try await outbox.claimedBefore(pushId: "c", at: 2001, lease: 60) == 5)
        let after = try await outbox.claim(owner: "w2", limit: 5, now: 2002, lease: 60)
        #expect(after.count == 5)
        #expect(after.allSatisfy { $0.cancelled })
        // The sweep takes what nobody holds, in batches, and moves the counts.
        #expect(try await outbox.sweepCancelled(at: 2003, limit: 7) == 7)
        #expect(try await outbox.sweepCancelled(at: 2003, limit: 100) == 13)
        #expect(try await outbox.sweepCancelled(at: 2003, limit: 100) == 0)
        let status = try #require(try await outbox.status(pushId: "c", now: 2003))
        #expect(status.counts.deliveries[.cancelled] == 20)
        #expect(status.counts.pending == 10)
        #expect(status.cancelledAt == 2001)
        // A cancelled resolution commits nothing more.
        try await outbox.beginPush(scalePush("c2"), audience: #"{"all":[]}"#, defaultZone: nil)
        _ = try await outbox.claimResolution(owner: "a", now: 2000, lease: 60, limit: 1)
        #expect(try await outbox.markCancelled(pushId: "c2", at: 2001))
        let chunk = ResolvedChunk(
            pushId: "c2", deviceIds: ["x"], outcomes: [], deliveries: [newDelivery("x", "tx")], through: "x",
            last: true, cap: nil, app: "default")
        #expect(try await outbox.enqueueChunk(chunk, owner: "a", leaseUntil: 2100) == nil)
        #expect(try await outbox.status(pushId: "c2", now: 2003)?.resolving == false)
        #expect(try await outbox.status(pushId: "c2", now: 2003)?.counts.total == 0)
    }

    @Test(
        "deliveries are listed in pages by cursor and state, each once; pending ones say why they wait",
        arguments: DeliveryStoreKind.allCases)
    func pages(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        // Another push's deliveries before and after, so the push's range is not the table.
        try await outbox.enqueue(
            scalePush("x1", devices: ["o"], at: 990), outcomes: [], deliveries: [newDelivery("o", "o1")])
        let devices = (0..<57).map { String(format: "p%02d", $0) }
        try await outbox.enqueue(
            scalePush("pg", devices: devices), outcomes: [], deliveries: devices.map { newDelivery($0, "t-\($0)") })
        try await outbox.enqueue(
            scalePush("x2", devices: ["o"], at: 1010), outcomes: [], deliveries: [newDelivery("o", "o2")])
        let claimed = try await outbox.claim(owner: "w", limit: 100, now: 2000, lease: 60).filter { $0.pushId == "pg" }
        _ = try await outbox.complete(
            claimed.enumerated().map { index, claim in
                index % 3 == 0
                    ? DeliveryUpdate(
                        id: claim.id, state: .pending, attempts: 1, nextAttemptAt: 2100, status: 429,
                        reason: "TooManyRequests")
                    : DeliveryUpdate(id: claim.id, state: .delivered, attempts: 1, status: 200, finishedAt: 2000)
            }, owner: "w")
        var seen: [String] = []
        var cursor: Int64 = 0
        while true {
            let page = try await outbox.deliveries(pushId: "pg", state: nil, after: cursor, limit: 10)
            seen += page.map(\.report.deviceId)
            guard page.count == 10, let last = page.last else { break }
            cursor = last.id
        }
        #expect(seen == devices)
        var pending: [String] = []
        cursor = 0
        while true {
            let page = try await outbox.deliveries(pushId: "pg", state: .pending, after: cursor, limit: 4)
            #expect(page.allSatisfy { $0.report.state == .pending })
            pending += page.map(\.report.deviceId)
            guard page.count == 4, let last = page.last else { break }
            cursor = last.id
        }
        #expect(pending == devices.enumerated().filter { $0.offset % 3 == 0 }.map(\.element))
        let waiting = try await outbox.waiting(pushId: "pg", limit: 1_000)
        #expect(waiting.count == pending.count)
        #expect(waiting.allSatisfy { $0.status == 429 && $0.reason == "TooManyRequests" })
        #expect(try await outbox.nextSendAt(pushId: "pg") == 2100)
        // The app's pushes, newest first, a page at a time; `active` keeps those under way.
        let firstPage = try await outbox.pushes(app: "default", active: false, after: nil, limit: 2, now: 2000)
        #expect(firstPage.map(\.push.id) == ["x2", "pg"])
        let secondPage = try await outbox.pushes(app: "default", active: false, after: "pg", limit: 2, now: 2000)
        #expect(secondPage.map(\.push.id) == ["x1"])
        #expect(try await outbox.pushes(app: "other", active: false, after: nil, limit: 2, now: 2000).isEmpty)
    }

    @Test(
        "retention deletes done pushes past the period in batches (rows, counts, the push); others stay",
        arguments: DeliveryStoreKind.allCases)
    func retention(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        let devices = (0..<25).map { "r\($0)" }
        try await outbox.enqueue(
            scalePush("old", devices: devices, at: 100), outcomes: [],
            deliveries: devices.map { newDelivery($0, "t-\($0)") })
        try await outbox.enqueue(
            scalePush("pending", devices: ["q"], at: 100), outcomes: [], deliveries: [newDelivery("q", "tq")])
        try await outbox.enqueue(
            scalePush("new", devices: ["n"], at: 5000), outcomes: [.noActiveToken("n")], deliveries: [])
        let claimed = try await outbox.claim(owner: "w", limit: 100, now: 200, lease: 60).filter { $0.pushId == "old" }
        _ = try await outbox.complete(
            claimed.map { DeliveryUpdate(id: $0.id, state: .delivered, attempts: 1, status: 200, finishedAt: 200) },
            owner: "w")
        _ = try await outbox.confirm(pushId: "old", deviceId: "r1", at: 300)
        // 25 deliveries, 25 devices, 1 receipt and the push: 52 rows, in batches of 10.
        var batches: [Int] = []
        while true {
            let removed = try await outbox.retain(before: 1000, limit: 10)
            if removed == 0 { break }
            batches.append(removed)
        }
        #expect(batches.reduce(0, +) == 52)
        #expect(batches.allSatisfy { $0 <= 10 })
        #expect(try await outbox.status(pushId: "old", now: 1000) == nil)
        #expect(try await outbox.report(pushId: "old") == nil)
        #expect(try await outbox.status(pushId: "pending", now: 1000) != nil)
        #expect(try await outbox.status(pushId: "new", now: 1000) != nil)
    }

    @Test(
        "deleting a device removes its deliveries, its place in pushes and its receipts, and the counts follow",
        arguments: DeliveryStoreKind.allCases)
    func deleteDevice(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        try await outbox.enqueue(
            scalePush("a", devices: ["gone", "kept", "none"]), outcomes: [.noActiveToken("none")],
            deliveries: [newDelivery("gone", "g1"), newDelivery("gone", "g2"), newDelivery("kept", "k1")])
        try await outbox.enqueue(
            scalePush("b", devices: ["gone"]), outcomes: [], deliveries: [newDelivery("gone", "g3", at: 9_999)])
        let claimed = try await outbox.claim(owner: "w", limit: 10, now: 2000, lease: 60)
        _ = try await outbox.complete(
            claimed.map { DeliveryUpdate(id: $0.id, state: .delivered, attempts: 1, status: 200, finishedAt: 2000) },
            owner: "w")
        #expect(try await outbox.confirm(pushId: "a", deviceId: "gone", at: 2001) == .recorded)
        // 3 deliveries (one scheduled), 2 device rows, 1 receipt.
        #expect(try await outbox.deleteDevice("gone") == 6)
        let a = try #require(try await outbox.status(pushId: "a", now: 2000))
        #expect(a.counts.matched == 2)
        #expect(a.counts.deliveries[.delivered] == 1)
        #expect(a.counts.devices[.delivered] == 1)
        #expect(a.counts.confirmed == 0)
        #expect(a.counts.notSent == ["no_active_token": 1])
        let b = try #require(try await outbox.status(pushId: "b", now: 2000))
        #expect(b.counts.total == 0)
        #expect(b.counts.matched == 0)
        #expect(try await outbox.report(pushId: "a")?.deliveries.map(\.deviceId) == ["kept"])
        #expect(try await outbox.deleteDevice("gone") == 0)
    }
}
