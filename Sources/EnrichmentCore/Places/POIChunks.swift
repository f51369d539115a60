import Foundation

/// POIs handed from a thread that reads an import file to the transaction that writes them, a chunk at a time,
/// with at most `depth` chunks waiting: the import holds a few chunks, never the file's POIs.
///
/// The reader calls `put` for each chunk and `finish` once (with its error, if any); the writer calls `next`
/// until it returns nil, and `cancel` if it stops early (then `put` throws and the reader ends).
public final class POIChunks: @unchecked Sendable {
    private let condition = NSCondition()
    private var queue: [[POI]] = []
    private var finished = false
    private var failure: (any Error)?
    private var cancelled = false
    private let depth: Int

    public init(depth: Int = 2) { self.depth = max(1, depth) }

    /// The writer stopped reading.
    public struct Cancelled: Error, CustomStringConvertible {
        public var description: String { "the import was stopped by its writer" }
    }

    /// Waits for room, then queues a chunk; throws once the writer has stopped.
    public func put(_ chunk: [POI]) throws {
        condition.lock()
        defer { condition.unlock() }
        while queue.count >= depth, !cancelled { condition.wait() }
        if cancelled { throw Cancelled() }
        queue.append(chunk)
        condition.broadcast()
    }

    /// The reader is done (with the error that stopped it, if any).
    public func finish(error: (any Error)? = nil) {
        condition.lock()
        finished = true
        failure = error
        condition.broadcast()
        condition.unlock()
    }

    /// The next chunk, waiting for the reader; nil at the end; the reader's error once it stopped on one.
    public func next() throws -> [POI]? {
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty, !finished { condition.wait() }
        if !queue.isEmpty {
            let chunk = queue.removeFirst()
            condition.broadcast()
            return chunk
        }
        if let failure { throw failure }
        return nil
    }

    /// The writer stops reading (it failed): the reader's next `put` throws.
    public func cancel() {
        condition.lock()
        cancelled = true
        queue.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}
