public import Delivery
import EnrichmentCore
public import EnrichmentRuntime
import Foundation
import Hummingbird
public import Prometheus
import Synchronization

/// The service's Prometheus metrics: requests, enrichment outcomes, upstream latency.
public final class ServiceMetrics: DeliveryObserver {
    public let registry: PrometheusCollectorRegistry
    private let upstreamLatency: DurationHistogram
    private let enrichLatency: DurationHistogram
    private let apnsLatency: DurationHistogram
    private let outboxPending: Gauge
    /// Counters by label values, so the hot path does not rebuild descriptors and labels per request.
    private let counters = Mutex<[[String]: Counter]>([:])

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        let buckets: [Duration] = [
            .microseconds(250), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        ]
        upstreamLatency = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                metricName: "enrichment_places_duration", unitName: "seconds",
                helpText: "Time spent in the places search per enrichment"),
            buckets: buckets)
        enrichLatency = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                metricName: "enrichment_duration", unitName: "seconds",
                helpText: "Time to enrich one payload"),
            buckets: buckets)
        apnsLatency = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                metricName: "apns_send_duration", unitName: "seconds",
                helpText: "Time from handing a push to the APNs client until its answer"),
            buckets: buckets + [.seconds(10), .seconds(30)])
        outboxPending = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "outbox_pending_deliveries", unitName: "",
                helpText: "Deliveries committed and not yet final"))
    }

    private func counter(_ key: [String], make: () -> Counter) -> Counter {
        if let counter = counters.withLock({ $0[key] }) { return counter }
        let counter = make()
        counters.withLock { $0[key] = counter }
        return counter
    }

    func request(method: String, route: String, status: Int) {
        counter(["http", method, route, String(status)]) {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "http_requests", unitName: "total", helpText: "HTTP requests handled"),
                labels: [("method", method), ("route", route), ("status", String(status))])
        }.increment()
    }

    /// One enrichment's outcome; `source` is `enrich` (`/v1/enrich`, `/preview`) or `push` (a delivery).
    func outcome(_ outcome: String, provider: String, source: String = "enrich", count: Int = 1) {
        counter(["outcome", outcome, provider, source]) {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "enrichment_outcomes", unitName: "total",
                    helpText: "Enrichment results by outcome, places provider and source (enrich or push)"),
                labels: [("outcome", outcome), ("provider", provider), ("source", source)])
        }.increment(by: Int64(count))
    }

    public func enriched(_ count: Int, outcome: String, provider: String) {
        self.outcome(outcome, provider: provider, source: "push", count: count)
    }

    /// A `POST /v1/enrich` answered on the event loop, from memory (`EnrichOnEventLoop`); the others went through
    /// the router (a fix or context read from the store, an error to answer, the answering turned off).
    func answeredOnEventLoop() {
        counter(["event-loop"]) {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "enrichment_event_loop_answers", unitName: "total",
                    helpText: "POST /v1/enrich requests answered on the event loop from memory (the rest: the router)"))
        }.increment()
    }

    /// A `POST /v1/enrich`'s enrichment: its duration, its places search's and its outcome.
    func enrichment(_ result: EnrichmentResult, started: ContinuousClock.Instant) {
        enrichDuration(ContinuousClock.now - started)
        if let ms = result.placesMilliseconds { placesDuration(.microseconds(Int64(ms * 1000))) }
        outcome(result.outcome.rawValue, provider: result.placesProvider ?? "none")
    }

    func placesDuration(_ duration: Duration) { upstreamLatency.record(duration) }
    func enrichDuration(_ duration: Duration) { enrichLatency.record(duration) }

    func fixes(accepted: Int, rejected: Int) {
        let descriptor = MetricNameDescriptor(
            metricName: "location_fixes", unitName: "total", helpText: "Location fixes received")
        registry.makeCounter(descriptor: descriptor, labels: [("result", "accepted")]).increment(by: Int64(accepted))
        registry.makeCounter(descriptor: descriptor, labels: [("result", "rejected")]).increment(by: Int64(rejected))
    }

    /// Attempts by the state they left the delivery in, with APNs's status and reason.
    public func attempts(_ count: Int, state: DeliveryState, status: Int?, reason: String?) {
        let status = status.map(String.init) ?? "none"
        let reason = reason ?? "none"
        counter(["delivery", state.rawValue, status, reason]) {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "apns_delivery_attempts", unitName: "total",
                    helpText: "Delivery attempts by resulting state, APNs status and reason"),
                labels: [("state", state.rawValue), ("status", status), ("reason", reason)])
        }.increment(by: Int64(count))
    }

    public func apnsLatency(_ duration: Duration) { apnsLatency.record(duration) }

    public func outboxDepth(_ depth: Int) { outboxPending.set(Int64(depth)) }

    /// 1 while sending to an environment is paused because APNs is unreachable (open or half open), else 0.
    public func circuit(environment: String, state: String) {
        registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "apns_circuit_open", unitName: "",
                helpText: "1 while APNs is unreachable and sending to the environment is paused, else 0"),
            labels: [("environment", environment)]
        ).set(Int64(state == "closed" ? 0 : 1))
    }

    /// Deliveries that waited for an unreachable APNs (not sent, or lost to the outage; no attempt used).
    public func waitingForAPNs(_ count: Int, environment: String) {
        counter(["waits", environment]) {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "apns_delivery_waits", unitName: "total",
                    helpText: "Deliveries put back to wait for an unreachable APNs (no attempt used)"),
                labels: [("environment", environment)])
        }.increment(by: Int64(count))
    }

    public func connectionsOpened(_ count: Int, environment: String) {
        counter(["connections", environment]) {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "apns_connections_opened", unitName: "total",
                    helpText: "HTTP/2 connections opened to APNs (first connects and reconnects)"),
                labels: [("environment", environment)])
        }.increment(by: Int64(count))
    }

    public func deactivated(reason: String) {
        counter(["deactivated", reason]) {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "apns_tokens_deactivated", unitName: "total",
                    helpText: "Device token registrations deactivated after an APNs answer"),
                labels: [("reason", reason)])
        }.increment()
    }

    /// The text exposition format.
    public func exposition() -> String { registry.emitToString() }
}

/// Counts every request by method, matched route and status.
struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServiceMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            let response = try await next(request, context)
            metrics.request(
                method: request.method.rawValue, route: context.endpointPath ?? "unmatched",
                status: response.status.code)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.request(method: request.method.rawValue, route: context.endpointPath ?? "unmatched", status: status)
            throw error
        }
    }
}
