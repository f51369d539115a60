import Delivery
import Testing

@Suite("APNs circuit breaker")
struct APNsCircuitTests {
    @Test(
        "an outage opens it with a doubling, capped backoff; the probe time lets one batch through; an answer closes it"
    )
    func lifecycle() {
        let circuit = APNsCircuit(base: 1, cap: 4, jitter: { 1 })
        #expect(circuit.state == .closed)
        #expect(circuit.allows(at: 100))
        #expect(circuit.recordAnswer(at: 100) == nil)  // closed stays closed, nothing to say

        #expect(circuit.recordOutage(at: 100) == .opened(failures: 1, probeAt: 101))
        // The other answers of the same batch report the same outage: said once.
        #expect(circuit.recordOutage(at: 100.1) == nil)
        #expect(!circuit.allows(at: 100.5))
        #expect(circuit.allows(at: 101))  // the probe
        #expect(circuit.state == .halfOpen)
        #expect(!circuit.allows(at: 101.1))  // one probe at a time
        #expect(circuit.recordOutage(at: 102) == .opened(failures: 2, probeAt: 104))
        #expect(circuit.allows(at: 104))
        #expect(circuit.recordOutage(at: 104) == .opened(failures: 3, probeAt: 108))
        #expect(circuit.allows(at: 108))
        #expect(circuit.recordOutage(at: 108) == .opened(failures: 4, probeAt: 112))  // capped at 4 s
        #expect(circuit.allows(at: 112))
        #expect(circuit.recordAnswer(at: 112.5) == .closed(outage: 12.5))
        #expect(circuit.state == .closed)
        // A new outage starts the backoff again.
        #expect(circuit.recordOutage(at: 200) == .opened(failures: 1, probeAt: 201))
    }

    @Test("deliveries it refuses wait for the probe time, and while a probe is out, a base delay from now")
    func refusedWait() {
        let circuit = APNsCircuit(base: 1, cap: 4, jitter: { 1 })
        #expect(circuit.recordOutage(at: 100) == .opened(failures: 1, probeAt: 101))
        #expect(circuit.retryAt(refusedAt: 100.5) == 101)
        #expect(circuit.allows(at: 101.2))  // the probe goes
        // Refused while the probe is out: its probe time has passed, so they would be due at once (and claimed,
        // enriched and refused again, in a loop) without the base delay.
        #expect(!circuit.allows(at: 101.3))
        #expect(circuit.retryAt(refusedAt: 101.3) == 102.3)
        _ = circuit.recordAnswer(at: 101.5)
        #expect(circuit.retryAt(refusedAt: 101.6) == 101.6)
    }

    @Test("jitter spreads the probes of several nodes between half and all of the backoff")
    func jitter() {
        let early = APNsCircuit(base: 10, cap: 60, jitter: { 0.2 })  // clamped to 0.5
        #expect(early.recordOutage(at: 0) == .opened(failures: 1, probeAt: 5))
        let late = APNsCircuit(base: 10, cap: 60, jitter: { 0.75 })
        #expect(late.recordOutage(at: 0) == .opened(failures: 1, probeAt: 7.5))
    }

    @Test("a probe whose lane died (no answer for longer than the cap) does not hold the circuit half open forever")
    func stuckProbe() {
        let circuit = APNsCircuit(base: 1, cap: 4, jitter: { 1 })
        _ = circuit.recordOutage(at: 0)
        #expect(circuit.allows(at: 1))
        #expect(!circuit.allows(at: 4))
        #expect(circuit.allows(at: 5.5))
    }
}
