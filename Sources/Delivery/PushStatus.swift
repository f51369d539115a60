public import Essentials

/// A push's figures, kept by the store as its deliveries change state (read in O(1), whatever the push's size).
public struct PushCounts: Sendable, Equatable {
    /// Deliveries by state (every state present, zero included).
    public var deliveries: [DeliveryState: Int]
    /// Devices the push holds so far (all of them once its audience is resolved).
    public var matched: Int
    /// Devices that got no delivery, by rule (`capped`, `no_active_token`, a timing rule).
    public var notSent: [String: Int]
    /// Devices with deliveries, by the state that describes the device: `delivered` when one of its deliveries
    /// was, else `pending` when one still is, else `failed`, `expired`, `cancelled` in that order.
    public var devices: [DeliveryState: Int]
    /// Devices still pending whose first send time is ahead and that were never tried (a scheduled or paced push).
    public var scheduled: Int
    /// Devices that confirmed the push (`POST /v1/receipts`).
    public var confirmed: Int
    /// The deliveries to Android registrations (FCM), by state; iOS's are the rest of `deliveries`.
    public var androidDeliveries: [DeliveryState: Int] = [:]

    /// The stored count of Android deliveries in `state` (kept beside each state's total).
    public static func androidKey(_ state: DeliveryState) -> String { "android:" + state.rawValue }

    /// The Android deliveries by state, from the stored counts (`androidKey`).
    public static func android(_ stored: [String: Int]) -> [DeliveryState: Int] {
        Dictionary(uniqueKeysWithValues: DeliveryState.allCases.map { ($0, stored[androidKey($0)] ?? 0) })
    }

    /// The deliveries to iOS registrations (APNs), by state.
    public var iosDeliveries: [DeliveryState: Int] {
        Dictionary(
            uniqueKeysWithValues: DeliveryState.allCases.map {
                ($0, (deliveries[$0] ?? 0) - (androidDeliveries[$0] ?? 0))
            })
    }

    public init(
        deliveries: [DeliveryState: Int] = [:], matched: Int = 0, notSent: [String: Int] = [:],
        devices: [DeliveryState: Int] = [:], scheduled: Int = 0, confirmed: Int = 0
    ) {
        self.deliveries = Dictionary(uniqueKeysWithValues: DeliveryState.allCases.map { ($0, deliveries[$0] ?? 0) })
        self.matched = matched
        self.notSent = notSent
        self.devices = devices
        self.scheduled = scheduled
        self.confirmed = confirmed
    }

    /// Deliveries in all.
    public var total: Int { deliveries.values.reduce(0, +) }
    public var pending: Int { deliveries[.pending] ?? 0 }

    /// The device-level figures of deliveries whose device has one delivery in the push (`solo`, by state) and of
    /// the states of each device that has several (`shared`): a device with several is counted once.
    public static func devices(solo: [DeliveryState: Int], shared: [[DeliveryState]]) -> [DeliveryState: Int] {
        var devices = solo
        for states in shared {
            let state: DeliveryState =
                if states.contains(.delivered) { .delivered } else if states.contains(.pending) {
                    .pending
                } else if states.contains(.failed) { .failed } else if states.contains(.expired) { .expired } else {
                    .cancelled
                }
            devices[state, default: 0] += 1
        }
        return devices
    }
}

/// Where a push stands, read without listing its deliveries.
public struct PushStatus: Sendable {
    public var push: PushDefinition
    public var counts: PushCounts
    /// True while its audience is being resolved, or while it is open (devices are still being added).
    public var resolving: Bool
    /// True while the push is open: its devices are added by requests (`POST /v1/push/{id}/devices`) until it is
    /// closed, by a request or when it has been idle too long.
    public var open: Bool
    /// When it was cancelled, if it was.
    public var cancelledAt: Double?
    /// A paced push (`rate`): when its last delivery is due, once every device is enqueued.
    public var endsAt: Double?

    public init(
        push: PushDefinition, counts: PushCounts, resolving: Bool = false, open: Bool = false,
        cancelledAt: Double? = nil, endsAt: Double? = nil
    ) {
        self.push = push
        self.counts = counts
        self.resolving = resolving
        self.open = open
        self.cancelledAt = cancelledAt
        self.endsAt = endsAt
    }

    /// True when every device is enqueued and every delivery is final.
    public var isDone: Bool { !resolving && counts.pending == 0 }
}

/// One delivery as listed page by page (`GET /v1/push/{id}/deliveries`): its id is the cursor.
public struct ListedDelivery: Sendable, Equatable {
    public var id: Int64
    public var report: DeliveryReport
    /// The enrichment outcome and rule of its last attempt's payload.
    public var outcome: String?
    public var rule: String?

    public init(id: Int64, report: DeliveryReport, outcome: String? = nil, rule: String? = nil) {
        self.id = id
        self.report = report
        self.outcome = outcome
        self.rule = rule
    }
}
