import APNsCore
import Delivery
import EnrichmentCore
import EnrichmentPostgres
import EnrichmentStorage
import Essentials
import Foundation
import PostgresNIO
import TestSupport
import Testing

/// Every implementation of the delivery stores (PostgreSQL joins here when it exists).
enum DeliveryStoreKind: String, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres
    var testDescription: String { rawValue }

    func makeStores(_ temp: TemporaryDatabase) async throws -> (any DeviceTokenStore, any OutboxStore) {
        switch self {
        case .sqlite:
            let database = try SQLiteDatabase(path: temp.path)
            return (SQLiteTokenStore(database: database), SQLiteOutbox(database: database))
        case .postgres:
            let database = try await PostgresTestDatabase.open()
            return (PostgresTokenStore(database: database), PostgresOutbox(database: database))
        }
    }
}

private func registration(
    _ device: String, _ token: String, at time: Double, topic: String = "com.example.app",
    environment: APNsEnvironmentName = .sandbox
) -> TokenRegistration {
    TokenRegistration(deviceId: device, token: token, topic: topic, environment: environment, registeredAt: time)
}

private func push(_ id: String, devices: [String], at time: Double = 1000, expiration: Int64? = nil) -> PushDefinition {
    PushDefinition(
        id: id, createdAt: time,
        payload: .object(["aps": .object(["alert": .string("hi"), "mutable-content": .int(1)])]), pushType: .alert,
        priority: .immediately, expiration: expiration.flatMap(APNsExpiration.init(epochSeconds:)), collapseId: "c1",
        topic: nil, enrich: true, mode: .woosmap,
        deviceIds: devices)
}

private func delivery(_ device: String, _ token: String) -> NewDelivery {
    NewDelivery(
        deviceId: device, token: token, topic: "com.example.app", environment: .sandbox,
        apnsId: UUID().uuidString.lowercased())
}

@Suite("Delivery store contract")
struct DeliveryStoreContractTests {
    @Test(
        "register creates, then refreshes (time, topic, environment) and reactivates",
        arguments: DeliveryStoreKind.allCases)
    func registerRefresh(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (tokens, _) = try await kind.makeStores(temp)
        #expect(try await tokens.register(registration("d1", "aa", at: 10)) == true)
        #expect(try await tokens.register(registration("d1", "bb", at: 20)) == true)
        let deactivated = try await tokens.deactivate(
            TokenDeactivation(deviceId: "d1", token: "aa", reason: "Unregistered", invalidatedAt: 15))
        #expect(deactivated?.active == false)
        #expect(deactivated?.reason == "Unregistered")
        #expect(try await tokens.activeRegistrations(deviceIds: ["d1"])["d1"]?.map(\.token) == ["bb"])
        #expect(
            try await tokens.register(registration("d1", "aa", at: 30, topic: "com.other", environment: .production))
                == false)
        let all = try await tokens.registrations(deviceId: "d1")
        #expect(all.map(\.token) == ["bb", "aa"])
        #expect(all[1] == registration("d1", "aa", at: 30, topic: "com.other", environment: .production))
        #expect(try await tokens.activeRegistrations(deviceIds: ["d1", "d2"]).keys.sorted() == ["d1"])
    }

    @Test(
        "a device's active registrations come oldest first, then by token at the same time",
        arguments: DeliveryStoreKind.allCases)
    func activeOrder(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (tokens, _) = try await kind.makeStores(temp)
        // Registered in an order that is neither the tokens' nor the times'.
        for (token, time) in [("mm", 20.0), ("zz", 10.0), ("aa", 20.0), ("cc", 5.0)] {
            #expect(try await tokens.register(registration("d1", token, at: time)) == true)
        }
        _ = try await tokens.register(registration("d2", "bb", at: 1))
        let active = try await tokens.activeRegistrations(deviceIds: ["d2", "d1"])
        #expect(active["d1"]?.map(\.token) == ["cc", "zz", "aa", "mm"])
        #expect(active["d2"]?.map(\.token) == ["bb"])
    }

    @Test(
        "deactivation honours the 410 timestamp and the registration it was sent for",
        arguments: DeliveryStoreKind.allCases)
    func deactivationRules(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (tokens, _) = try await kind.makeStores(temp)
        _ = try await tokens.register(registration("d1", "aa", at: 100))
        // APNs learned of the removal before the latest registration: kept.
        #expect(
            try await tokens.deactivate(
                TokenDeactivation(
                    deviceId: "d1", token: "aa", reason: "Unregistered", invalidatedAt: 50, unlessRegisteredAfter: 50))
                == nil)
        // Sent for another topic than the registration now has: kept.
        #expect(
            try await tokens.deactivate(
                TokenDeactivation(
                    deviceId: "d1", token: "aa", reason: "BadDeviceToken", invalidatedAt: 120,
                    onlyFor: ("com.old", .sandbox))) == nil)
        #expect(try await tokens.registrations(deviceId: "d1").first?.active == true)
        let gone = try await tokens.deactivate(
            TokenDeactivation(
                deviceId: "d1", token: "aa", reason: "Unregistered", invalidatedAt: 150, unlessRegisteredAfter: 150))
        #expect(gone?.invalidatedAt == 150)
        // Already inactive: nothing to report (so the webhook hears of it once).
        #expect(
            try await tokens.deactivate(
                TokenDeactivation(deviceId: "d1", token: "aa", reason: "Unregistered", invalidatedAt: 160)) == nil)
        #expect(try await tokens.remove(deviceId: "d1", token: "aa") == true)
        #expect(try await tokens.remove(deviceId: "d1", token: "aa") == false)
        _ = try await tokens.register(registration("d2", "cc", at: 1))
        _ = try await tokens.register(registration("d2", "dd", at: 1))
        #expect(try await tokens.removeDevice("d2") == 2)
    }

    @Test(
        "a push round-trips; claims are leased, ordered, and not handed out twice",
        arguments: DeliveryStoreKind.allCases)
    func claims(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        let definition = push("p1", devices: ["d1", "d2", "d3"], expiration: 5000)
        try await outbox.enqueue(
            definition, outcomes: [.noActiveToken("d3")],
            deliveries: [delivery("d1", "aa"), delivery("d1", "bb"), delivery("d2", "cc")])
        // Read back without its devices (a push of a million lists them page by page), with its app.
        var stored = definition
        stored.deviceIds = []
        #expect(try await outbox.push(id: "p1") == stored)
        #expect(try await outbox.push(id: "p1")?.app == AppNamespace.defaultApp)
        #expect(try await outbox.depth() == 3)
        #expect(try await outbox.nextDue() == 1000)
        // Not due yet.
        #expect(try await outbox.claim(owner: "a", limit: 10, now: 999, lease: 60).isEmpty)
        let first = try await outbox.claim(owner: "a", limit: 2, now: 1000, lease: 60)
        #expect(first.map(\.delivery.token) == ["aa", "bb"])
        #expect(first.allSatisfy { $0.attempts == 0 && $0.pushId == "p1" })
        let second = try await outbox.claim(owner: "b", limit: 10, now: 1001, lease: 60)
        #expect(second.map(\.delivery.token) == ["cc"])
        // All three are held: the next claimable moment is the end of the first lease.
        #expect(try await outbox.nextDue() == 1060)
        // A lease that ran out can be taken by another worker; taking it over counts as an attempt.
        let taken = try await outbox.claim(owner: "b", limit: 10, now: 1061, lease: 60)
        #expect(Set(taken.map(\.delivery.token)) == ["aa", "bb"])
        #expect(taken.allSatisfy { $0.attempts == 1 })
        // The first owner's late answer is ignored; the holder's is written.
        let late = try await outbox.complete(
            [DeliveryUpdate(id: first[0].id, state: .delivered, attempts: 1, status: 200, finishedAt: 1062)], owner: "a"
        )
        #expect(late == 0)
        let written = try await outbox.complete(
            [
                DeliveryUpdate(id: taken[0].id, state: .delivered, attempts: 1, status: 200, finishedAt: 1062),
                DeliveryUpdate(
                    id: taken[1].id, state: .pending, attempts: 1, nextAttemptAt: 2000, status: 503,
                    reason: "ServiceUnavailable", outcome: "enriched", rule: "nearest_poi"),
            ], owner: "b")
        #expect(written == 2)
        #expect(try await outbox.pendingCount(pushId: "p1") == 2)
        // The retry is due at 2000, not before (cc's unanswered lease ran out long ago, so it is taken again).
        #expect(try await outbox.claim(owner: "b", limit: 10, now: 1999, lease: 60).map(\.delivery.token) == ["cc"])
        let retry = try await outbox.claim(owner: "b", limit: 10, now: 2000, lease: 60)
        #expect(retry.map(\.delivery.token) == ["bb"])
        #expect(retry.map(\.attempts) == [1])
        let report = try #require(try await outbox.report(pushId: "p1"))
        #expect(report.devices.map(\.deviceId) == ["d1", "d2", "d3"])
        #expect(report.devices[0].outcome == "enriched")
        #expect(report.devices[2].outcome == "not_sent")
        #expect(report.devices[2].rule == "no_active_token")
        #expect(report.counts[.delivered] == 1)
        #expect(report.counts[.pending] == 2)
        #expect(report.isDone == false)
        #expect(try await outbox.report(pushId: "nope") == nil)
    }

    @Test(
        "profiles set in bulk: zones set and cleared, tags replaced, a device listed twice keeps its last entry",
        arguments: DeliveryStoreKind.allCases)
    func profilesInBulk(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (tokens, _) = try await kind.makeStores(temp)
        try await tokens.setProfile(deviceId: "d1", timeZone: "Europe/Paris", tags: ["plan:free", "lang:fr"], at: 1)
        try await tokens.setProfile(deviceId: "d2", timeZone: "Asia/Kolkata", tags: ["plan:pro"], at: 1)
        try await tokens.setProfiles(
            [
                ProfileChange(deviceId: "d1", tags: ["plan:pro", "plan:pro", "topic:news"]),
                ProfileChange(deviceId: "d2", timeZone: .some(nil)),
                ProfileChange(deviceId: "d3", timeZone: "America/New_York", tags: ["beta:tester"]),
                ProfileChange(deviceId: "d3", tags: ["lang:en"]),
            ], at: 2)
        let profiles = try await tokens.profiles(deviceIds: ["d1", "d2", "d3", "d4"])
        #expect(profiles["d1"] == DeviceProfile(timeZone: "Europe/Paris", tags: ["plan:pro", "topic:news"]))
        #expect(profiles["d2"] == DeviceProfile(timeZone: nil, tags: ["plan:pro"]))
        #expect(profiles["d3"] == DeviceProfile(timeZone: "America/New_York", tags: ["lang:en"]))
        #expect(profiles["d4"] == nil)
        #expect(Set(try await tokens.devices(taggedWith: "plan:pro")) == ["d1", "d2"])
        #expect(try await tokens.devices(taggedWith: "lang:fr").isEmpty)
    }

    @Test("claims are released for a restart: all of them, or one owner's", arguments: DeliveryStoreKind.allCases)
    func release(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        try await outbox.enqueue(
            push("p1", devices: ["d1"]), outcomes: [],
            deliveries: [delivery("d1", "aa"), delivery("d1", "bb"), delivery("d1", "cc")])
        _ = try await outbox.claim(owner: "a", limit: 1, now: 1000, lease: 600)
        _ = try await outbox.claim(owner: "b", limit: 1, now: 1000, lease: 600)
        #expect(try await outbox.releaseClaims(owner: "a") == 1)
        #expect(try await outbox.claim(owner: "c", limit: 10, now: 1001, lease: 600).count == 2)
        #expect(try await outbox.releaseClaims(owner: nil) == 3)
        #expect(try await outbox.claim(owner: "d", limit: 10, now: 1002, lease: 600).count == 3)
    }

    @Test("final states are final: a delivered delivery is never claimed again", arguments: DeliveryStoreKind.allCases)
    func finalStates(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        try await outbox.enqueue(
            push("p1", devices: ["d1"]), outcomes: [], deliveries: [delivery("d1", "aa"), delivery("d1", "bb")])
        let claimed = try await outbox.claim(owner: "a", limit: 10, now: 1000, lease: 60)
        try await outbox.complete(
            [
                DeliveryUpdate(id: claimed[0].id, state: .delivered, attempts: 1, status: 200, finishedAt: 1001),
                DeliveryUpdate(id: claimed[1].id, state: .expired, attempts: 0, finishedAt: 1001),
            ], owner: "a")
        #expect(try await outbox.releaseClaims(owner: nil) == 0)
        #expect(try await outbox.claim(owner: "a", limit: 10, now: 9999, lease: 60).isEmpty)
        #expect(try await outbox.depth() == 0)
        #expect(try await outbox.nextDue() == nil)
        let report = try #require(try await outbox.report(pushId: "p1"))
        #expect(report.isDone)
        #expect(report.deliveries.map(\.state) == [.delivered, .expired])
    }

    @Test(
        "an update without an answer from APNs (expired while waiting) keeps the last answer's status and reason; a new answer replaces them",
        arguments: DeliveryStoreKind.allCases)
    func lastAnswerKept(kind: DeliveryStoreKind) async throws {
        let temp = try TemporaryDatabase()
        let (_, outbox) = try await kind.makeStores(temp)
        try await outbox.enqueue(
            push("p1", devices: ["d1", "d2"]), outcomes: [],
            deliveries: [delivery("d1", "aa"), delivery("d2", "bb")])
        var claimed = try await outbox.claim(owner: "a", limit: 10, now: 1000, lease: 60)
        try await outbox.complete(
            claimed.map {
                DeliveryUpdate(
                    id: $0.id, state: .pending, attempts: 1, nextAttemptAt: 1001, status: 500,
                    reason: "InternalServerError", error: "waiting for APNs")
            }, owner: "a")
        claimed = try await outbox.claim(owner: "a", limit: 10, now: 1002, lease: 60)
        #expect(claimed.count == 2)
        try await outbox.complete(
            [
                DeliveryUpdate(
                    id: claimed[0].id, state: .expired, attempts: 1, error: "not sent within the maximum age",
                    finishedAt: 1003),
                DeliveryUpdate(id: claimed[1].id, state: .delivered, attempts: 2, status: 200, finishedAt: 1003),
            ], owner: "a")
        let report = try #require(try await outbox.report(pushId: "p1"))
        let byToken = Dictionary(uniqueKeysWithValues: report.deliveries.map { ($0.token, $0) })
        #expect(byToken["aa"]?.state == .expired)
        #expect(byToken["aa"]?.status == 500)
        #expect(byToken["aa"]?.reason == "InternalServerError")
        #expect(byToken["aa"]?.error == "not sent within the maximum age")
        #expect(byToken["bb"]?.status == 200)
        #expect(byToken["bb"]?.reason == nil)
    }
}

@Suite("PostgreSQL specifics")
struct PostgresSpecificTests {
    @Test("nodes starting together migrate once: one takes the advisory lock, the others find nothing to do")
    func concurrentMigrations() async throws {
        let settings = try await PostgresTestDatabase.make()
        let backends = try await withThrowingTaskGroup(of: PostgresBackend.self) { group in
            for _ in 0..<4 {
                group.addTask { try await PostgresBackend(settings: settings, logger: PostgresTestDatabase.logger) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        defer { for backend in backends { backend.close() } }
        let rows = try await backends[0].client.query("SELECT version FROM schema_migrations ORDER BY version")
        var versions: [String] = []
        for try await version in rows.decode(String.self) { versions.append(version) }
        #expect(
            versions == [
                "v1-fixes", "v1-pois", "v10-last-fixes", "v11-schedule", "v12-audience-history", "v13-push-callbacks",
                "v14-push-origin", "v15-push-scale", "v16-deliveries-fillfactor",
                "v2-delivery", "v3-pois-version", "v4-location",
                "v5-poi-deletions", "v6-takeover", "v7-activities", "v8-channels", "v9-activity-invalid",
            ])
        // Deliveries' pages keep room for their claims' row versions (heap-only updates).
        let options = try await backends[0].client.query(
            "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'deliveries'")
        var stored: [String?] = []
        for try await option in options.decode(String?.self) { stored.append(option) }
        #expect(stored == ["fillfactor=50"])
        // Every node can use the schema.
        for backend in backends { #expect(try await PostgresPOIStore(database: backend).count() == 0) }
    }

    @Test("sslmode=require with sslrootcert connects over verified TLS; an untrusted server certificate is refused")
    func tls() async throws {
        let ca = try #require(
            ProcessInfo.processInfo.environment["ENRICH_TEST_DATABASE_CA"], "run through scripts/with-postgres.sh")
        var settings = try await PostgresTestDatabase.make()
        settings.tls = .require
        settings.rootCertificate = ca
        let backend = try await PostgresBackend(settings: settings, logger: PostgresTestDatabase.logger)
        defer { backend.close() }
        let rows = try await backend.client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        #expect(try await rows.decode(Bool.self).first { _ in true } == true)

        settings.rootCertificate = nil
        settings.connectTimeout = .seconds(5)
        do {
            _ = try await PostgresBackend(settings: settings, logger: PostgresTestDatabase.logger)
            Issue.record("an untrusted server certificate was accepted")
        } catch {
            #expect("\(error)".contains("cannot use postgres://enrich@127.0.0.1"), "\(error)")
            #expect("\(error)".localizedCaseInsensitiveContains("certificate"), "\(error)")
        }
    }

    @Test("a database URL is checked without echoing its password")
    func settingsErrors() throws {
        #expect(throws: PostgresSettingsError.self) { try PostgresSettings(url: "mysql://u:secret@h/db") }
        do {
            _ = try PostgresSettings(url: "postgres://u:secret@h:5432/db?sslmode=sometimes")
            Issue.record("an unknown sslmode was accepted")
        } catch {
            #expect(!error.description.contains("secret"))
            #expect(error.description.contains("sslmode"))
        }
        let parsed = try PostgresSettings(url: "postgres://enrich:p%40ss@db.internal:6543/app?sslmode=require")
        #expect(parsed.password == "p@ss")
        #expect(parsed.port == 6543)
        #expect(parsed.tls == .require)
        #expect(!parsed.description.contains("p@ss"))
    }
}
