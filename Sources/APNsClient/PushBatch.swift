import APNsCore
import NIOCore

// What the pool sends: the requests of one `send` call (`PushBatch`) and each push of it with its attempts so far
// (`PushJob`).

/// One push of a batch, with what happened to it so far.
struct PushJob {
    let batch: PushBatch
    let index: Int
    /// Attempts that got an answer or failed (1 for the first send).
    var attempt = 1
    var refreshedToken = false
    /// Times the push was handed back unprocessed (GOAWAY, REFUSED_STREAM); bounded so a server that refuses
    /// everything cannot loop forever.
    var refusals = 0
    /// Put on a connection that then died or timed out before answering: the peer may have received it.
    var mayHaveReachedPeer = false
}

/// The requests of one `send` call, and where they stand. Touched only on the pool's event loop.
final class PushBatch: @unchecked Sendable {
    /// The caller's array, shared (not copied): this batch is its part from `offset`, `count` long.
    private let all: [APNsRequest]
    private let offset: Int
    let count: Int
    let payloads: [ByteBuffer]
    let concurrency: Int
    let onResult: (Int, APNsSendResult) -> Void
    let promise: EventLoopPromise<Void>
    /// The next request never sent.
    var nextNew = 0
    /// Pushes to send again before new ones (refused, lost with a connection, or due for a retry).
    var again = CircularBuffer<PushJob>()
    /// Started and not finished (on the wire, waiting to go again, or waiting out a retry delay).
    var active = 0
    var finished = 0

    init(
        requests: [APNsRequest], range: Range<Int>, payloads: [ByteBuffer], concurrency: Int,
        promise: EventLoopPromise<Void>, onResult: @escaping (Int, APNsSendResult) -> Void
    ) {
        all = requests
        offset = range.lowerBound
        count = range.count
        self.payloads = payloads
        self.concurrency = max(1, concurrency)
        self.promise = promise
        self.onResult = onResult
    }

    /// The batch's request `index` (counted from its start), read in place.
    subscript(index: Int) -> APNsRequest {
        _read { yield all[offset + index] }
    }

    var hasWork: Bool { !again.isEmpty || (nextNew < count && active < concurrency) }

    /// The next push to put on the wire: one to send again first, else a new one within the concurrency.
    func take() -> PushJob? {
        if let job = again.popFirst() { return job }
        guard nextNew < count, active < concurrency else { return nil }
        defer { nextNew += 1 }
        active += 1
        return PushJob(batch: self, index: nextNew)
    }
}
