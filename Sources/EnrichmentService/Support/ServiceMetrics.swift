import Foundation
import Hummingbird
public import Prometheus
import Synchronization

/// The service's Prometheus metrics: requests, enrichment outcomes, upstream latency.
public final class ServiceMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let upstreamLatency: DurationHistogram
    private let enrichLatency: DurationHistogram
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

    func outcome(_ outcome: String, provider: String) {
        counter(["outcome", outcome, provider]) {
            registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "enrichment_outcomes", unitName: "total", helpText: "Enrichment results by outcome"),
                labels: [("outcome", outcome), ("provider", provider)])
        }.increment()
    }

    func placesDuration(_ duration: Duration) { upstreamLatency.record(duration) }
    func enrichDuration(_ duration: Duration) { enrichLatency.record(duration) }

    func fixes(accepted: Int, rejected: Int) {
        let descriptor = MetricNameDescriptor(
            metricName: "location_fixes", unitName: "total", helpText: "Location fixes received")
        registry.makeCounter(descriptor: descriptor, labels: [("result", "accepted")]).increment(by: Int64(accepted))
        registry.makeCounter(descriptor: descriptor, labels: [("result", "rejected")]).increment(by: Int64(rejected))
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
