import APNsCore
import Delivery
import EnrichmentPostgres
import EnrichmentStorage
import Foundation
import TestSupport
import Testing

extension DeliveryStoreKind {
    func makeActivityStore(_ temp: TemporaryDatabase) async throws -> any ActivityStore {
        switch self {
        case .sqlite: SQLiteActivityStore(database: try SQLiteDatabase(path: temp.path))
        case .postgres: PostgresActivityStore(database: try await PostgresTestDatabase.open())
        }
    }
}

private func update(
    _ device: String, _ activity: String, token: String = String(repeating: "ab", count: 32), at time: Double = 10,
    frequent: Bool? = true
) -> ActivityRegistration {
    ActivityRegistration(
        deviceId: device, kind: .update, activityType: "DeliveryAttributes", activityId: activity, token: token,
        topic: "com.example.app", environment: .sandbox, frequentPushesEnabled: frequent, registeredAt: time)
}

@Suite("Activity store contract")
struct ActivityStoreContractTests {
    @Test(
        "push-to-start per type and update tokens per activity: created, refreshed, listed, removed",
        arguments: DeliveryStoreKind.allCases)
    func registrations(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let store = try await kind.makeActivityStore(temp)
        let start = ActivityRegistration(
            deviceId: "d1", kind: .pushToStart, activityType: "DeliveryAttributes", activityId: nil,
            token: String(repeating: "cd", count: 32), topic: "com.example.app", environment: .production,
            frequentPushesEnabled: nil, registeredAt: 5)
        #expect(try await store.register(start) == true)
        #expect(try await store.register(update("d1", "A-1")) == true)
        #expect(
            try await store.register(
                update("d1", "A-1", token: String(repeating: "ef", count: 32), at: 20, frequent: false)) == false)
        #expect(try await store.register(update("d2", "A-1")) == true)
        let listed = try await store.registrations(deviceId: "d1")
        #expect(listed.map(\.kind) == [.pushToStart, .update])
        #expect(listed[0] == start)
        #expect(listed[1].token == String(repeating: "ef", count: 32))
        #expect(listed[1].frequentPushesEnabled == false)
        #expect(listed[1].registeredAt == 20)
        #expect(try await store.registration(deviceId: "d1", kind: .pushToStart, key: "DeliveryAttributes") == start)
        #expect(try await store.registration(deviceId: "d1", kind: .update, key: "DeliveryAttributes") == nil)
        #expect(try await store.remove(deviceId: "d1", kind: .update, key: "A-1") == true)
        #expect(try await store.remove(deviceId: "d1", kind: .update, key: "A-1") == false)
        #expect(try await store.registrations(deviceId: "d1") == [start])
        #expect(try await store.registrations(deviceId: "d2").count == 1)
    }

    @Test(
        "only a newer timestamp is recorded; after an end nothing is, and a new token keeps the order",
        arguments: DeliveryStoreKind.allCases)
    func ordering(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let store = try await kind.makeActivityStore(temp)
        _ = try await store.register(update("d1", "A-1"))
        func send(_ timestamp: Int64, ends: Bool = false) async throws -> ActivitySendDecision {
            try await store.recordSend(
                deviceId: "d1", kind: .update, key: "A-1", timestamp: timestamp, ends: ends, now: 500)
        }
        #expect(try await send(100) == .recorded)
        #expect(try await send(100) == .notNewer(last: 100))
        #expect(try await send(99) == .notNewer(last: 100))
        #expect(try await send(101) == .recorded)
        // The phone gave the activity a new token: the order of its updates is unchanged.
        _ = try await store.register(update("d1", "A-1", token: String(repeating: "01", count: 32), at: 30))
        #expect(try await send(101) == .notNewer(last: 101))
        #expect(try await store.registration(deviceId: "d1", kind: .update, key: "A-1")?.lastTimestamp == 101)
        #expect(try await send(110, ends: true) == .recorded)
        #expect(try await send(120) == .ended(at: 500))
        #expect(try await store.registration(deviceId: "d1", kind: .update, key: "A-1")?.endedAt == 500)
        #expect(
            try await store.recordSend(deviceId: "d9", kind: .update, key: "A-1", timestamp: 1, ends: false, now: 1)
                == .unknown)
    }

    @Test(
        "a token APNs says is gone is marked, unless registered again after; registering clears the mark",
        arguments: DeliveryStoreKind.allCases)
    func invalidation(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let store = try await kind.makeActivityStore(temp)
        let token = String(repeating: "ab", count: 32)
        _ = try await store.register(update("d1", "A-1", token: token, at: 100))
        // APNs's 410 says the token stopped at 90: registered after that, it is left alone.
        #expect(
            try await store.invalidate(
                deviceId: "d1", token: token, reason: "Unregistered", at: 90, unlessRegisteredAfter: 90) == 0)
        #expect(
            try await store.invalidate(
                deviceId: "d1", token: token, reason: "Unregistered", at: 150, unlessRegisteredAfter: 150) == 1)
        let marked = try await store.registration(deviceId: "d1", kind: .update, key: "A-1")
        #expect(marked?.invalidatedAt == 150)
        #expect(marked?.invalidReason == "Unregistered")
        #expect(
            try await store.invalidate(
                deviceId: "d1", token: token, reason: "Unregistered", at: 160, unlessRegisteredAfter: nil) == 0)
        _ = try await store.register(update("d1", "A-1", token: token, at: 200))
        #expect(try await store.registration(deviceId: "d1", kind: .update, key: "A-1")?.invalidatedAt == nil)
    }

    @Test("two writers racing with the same timestamp: exactly one is recorded", arguments: DeliveryStoreKind.allCases)
    func race(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let store = try await kind.makeActivityStore(temp)
        _ = try await store.register(update("d1", "A-1"))
        let decisions = try await withThrowingTaskGroup(of: ActivitySendDecision.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    try await store.recordSend(
                        deviceId: "d1", kind: .update, key: "A-1", timestamp: 200, ends: false, now: 1)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(decisions.filter { $0 == .recorded }.count == 1)
        #expect(decisions.filter { $0 == .notNewer(last: 200) }.count == 7)
    }
}

@Suite("Channel store contract")
struct ChannelStoreContractTests {
    @Test("channels are kept per app and environment, read by id, removed", arguments: DeliveryStoreKind.allCases)
    func channels(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let store: any ChannelStore =
            switch kind {
            case .sqlite: SQLiteChannelStore(database: try SQLiteDatabase(path: temp.path))
            case .postgres: PostgresChannelStore(database: try await PostgresTestDatabase.open())
            }
        let a = BroadcastChannel(
            channelID: "c1==", bundleID: "com.a", environment: .sandbox, storagePolicy: 0, createdAt: 1)
        let b = BroadcastChannel(
            channelID: "c2==", bundleID: "com.a", environment: .production, storagePolicy: 1, createdAt: 2)
        let c = BroadcastChannel(
            channelID: "c3==", bundleID: "com.b", environment: .sandbox, storagePolicy: 1, createdAt: 3)
        for channel in [a, b, c] { try await store.add(channel) }
        try await store.add(a)
        #expect(try await store.channels(bundleID: nil, environment: nil) == [a, b, c])
        #expect(try await store.channels(bundleID: "com.a", environment: nil) == [a, b])
        #expect(try await store.channels(bundleID: nil, environment: .sandbox) == [a, c])
        #expect(try await store.channels(bundleID: "com.b", environment: .production) == [])
        #expect(try await store.channel(id: "c2==") == b)
        #expect(try await store.remove(id: "c2==") == true)
        #expect(try await store.remove(id: "c2==") == false)
        #expect(try await store.channel(id: "c2==") == nil)
    }
}
