public import Tracing

/// Where the engine's spans go: a tracer, or none. With none (no OTLP endpoint) a traced block runs as it is: no
/// span is made and no task-local is bound, so tracing costs nothing when it is off.
public struct SpanRecorder: Sendable {
    public let tracer: (any Tracer)?

    public init(_ tracer: (any Tracer)?) { self.tracer = tracer }

    /// The process's tracer when one was set up (`InstrumentationSystem.bootstrap`), else none.
    public static var process: SpanRecorder {
        let tracer = InstrumentationSystem.tracer
        return SpanRecorder(tracer is NoOpTracer ? nil : tracer)
    }

    /// Runs `body` inside a span named `name` (its parent is the task's current span), or as it is without a tracer.
    public func run<T>(
        _ name: String, kind: SpanKind = .internal, _ body: ((any Span)?) async throws -> T
    ) async rethrows -> T {
        guard let tracer else { return try await body(nil) }
        return try await tracer.withSpan(name, ofKind: kind) { span in try await body(span) }
    }
}
