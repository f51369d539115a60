public import Essentials
public import Foundation

/// The enqueue stage's decisions for a list of devices (a request's `device_ids`, or one chunk of a resolved
/// audience): which get deliveries (one per active registration), when each is due (its zone's timing, the push's
/// pace), and which get none and why. No I/O: the engine reads the registrations and profiles, and commits what
/// this decides.
public struct EnqueuePlanner: Sendable {
    /// The push's timing (`send_at`, `local_time`, `quiet_hours`), nil: at once.
    public var timing: SendTiming?
    /// The zone of a device without one, when the timing takes the app's.
    public var fallbackZone: TimeZone?
    /// Deliveries per second at most (`rate`), nil: as fast as the wire.
    public var rate: Double?
    /// When the push was accepted (epoch seconds).
    public var createdAt: Double

    public init(timing: SendTiming?, defaultZone: String?, rate: Double?, createdAt: Double) {
        self.timing = timing
        self.fallbackZone =
            timing?.missingZone == .appDefault ? defaultZone.flatMap(ZoneClock.zone(named:)) : nil
        self.rate = rate
        self.createdAt = createdAt
    }

    /// What the planner decided for a list of devices.
    public struct Plan: Sendable {
        public var deliveries: [NewDelivery] = []
        /// Devices that get no delivery, with why (no active registration, the timing skipped them).
        public var notSent: [DeviceOutcome] = []
        /// Each device with deliveries: its send time and whether quiet hours moved it.
        public var planned: [String: (at: Double, held: Bool)] = [:]
        /// A paced push: when the delivery after the last one planned may be due.
        public var paceNext: Double?

        /// The plan's figures without the devices `capped` (they get none of their deliveries).
        public func figures(excluding capped: Set<String>) -> (held: Int, first: Double?, last: Double?) {
            let kept = planned.filter { !capped.contains($0.key) }.values
            return (kept.count { $0.held }, kept.map(\.at).min(), kept.map(\.at).max())
        }
    }

    /// Plans `deviceIds` (in order): `registrations` are their active ones, `profiles` their zones (read only when
    /// the timing needs a zone); a paced push's deliveries follow one another from `paceFrom` on (nil: from `now`).
    public func plan(
        deviceIds: [String], registrations: [String: [TokenRegistration]], profiles: [String: DeviceProfile],
        paceFrom: Double?, now: Double
    ) -> Plan {
        var plan = Plan()
        // Each delivery's apns-id: the system's random bits read in blocks, not one system call per id.
        var random = BufferedSystemRandom(expected: 2 * deviceIds.count)
        let step = rate.map { 1 / $0 }
        var slot = max(paceFrom ?? now, now)
        for id in deviceIds {
            guard let active = registrations[id], !active.isEmpty else {
                plan.notSent.append(.noActiveToken(id))
                continue
            }
            var scheduledAt: Double?
            if let timing {
                let zone = profiles[id]?.timeZone.flatMap(ZoneClock.zone(named:)) ?? fallbackZone
                switch timing.decide(zone: zone, now: createdAt) {
                case .skip(let rule):
                    plan.notSent.append(DeviceOutcome(deviceId: id, outcome: "not_sent", rule: rule))
                    continue
                case .send(let at, let wasHeld):
                    plan.planned[id] = (at, wasHeld)
                    if at > createdAt { scheduledAt = at }
                }
            }
            for registration in active {
                var due = scheduledAt
                if let step {
                    // Paced: each delivery has its own slot, and a timing's later send time wins.
                    due = max(due ?? slot, slot)
                    slot += step
                }
                plan.deliveries.append(
                    NewDelivery(
                        deviceId: id, token: registration.token, topic: registration.topic,
                        environment: registration.environment, apnsId: RandomUUID.lowercased(using: &random),
                        scheduledAt: due))
            }
            if step != nil, plan.planned[id] == nil {
                plan.planned[id] = (plan.deliveries.last?.scheduledAt ?? now, false)
            }
        }
        if step != nil { plan.paceNext = slot }
        return plan
    }
}
