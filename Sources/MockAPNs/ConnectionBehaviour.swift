public import Essentials

/// How the mock treats each connection, to play what real servers do to clients: GOAWAY after some requests (as
/// nginx's `keepalive_requests` and APNs maintenance do), GOAWAY naming a last stream below streams in flight, abrupt
/// closes, lowered stream limits, and a peer that goes silent (PINGs unanswered).
///
/// Counts are per connection and count pushes only (not control requests). A new connection takes the behaviour
/// set when it opens.
public struct ConnectionBehaviour: Sendable, Equatable {
    /// After this many pushes: GOAWAY(NO_ERROR), answer what was processed, then close.
    public var goAwayAfter: Int?
    /// With `goAwayAfter`: this many pushes before the GOAWAY are held, not processed, and the GOAWAY's last
    /// stream id is below them (RFC 9113 6.8: the client must send them again).
    public var goAwayHeldBack = 0
    /// After this many pushes are answered: close the connection with no GOAWAY; later pushes are not processed.
    public var closeAfter: Int?
    /// SETTINGS_MAX_CONCURRENT_STREAMS sent at the start (APNs: 1000).
    public var maxConcurrentStreams = 1000
    /// After `after` pushes, send SETTINGS with a new stream limit (in order of `after`).
    public var streamLimitChanges: [StreamLimitChange] = []
    /// After this many pushes are answered: stop reading and answering, PINGs included (a dead peer).
    public var silentAfter: Int?

    /// One change of the stream limit during a connection.
    public struct StreamLimitChange: Sendable, Equatable {
        public var after: Int
        public var limit: Int
        public init(after: Int, limit: Int) {
            self.after = after
            self.limit = limit
        }
    }

    public init() {}

    /// Reads `{"goaway_after": 1000, "goaway_held_back": 10, "close_after": 500, "max_concurrent_streams": 100,
    /// "stream_limits": [[200, 1], [400, 100]], "silent_after": 50}` (every key optional).
    public init(json: JSONValue) throws(MockConfigurationError) {
        guard case .object(let members) = json else { throw .init("the behaviour must be a JSON object") }
        let known: Set = [
            "goaway_after", "goaway_held_back", "close_after", "max_concurrent_streams", "stream_limits",
            "silent_after",
        ]
        if let unknown = members.keys.sorted().first(where: { !known.contains($0) }) {
            throw .init("unknown behaviour '\(unknown)'; known: \(known.sorted().joined(separator: ", "))")
        }
        func count(_ key: String, _ range: ClosedRange<Int64>) throws(MockConfigurationError) -> Int? {
            guard let value = members[key], value != .null else { return nil }
            guard case .int(let number) = value, range.contains(number) else {
                throw .init("\(key) must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return Int(number)
        }
        goAwayAfter = try count("goaway_after", 1...1_000_000_000)
        goAwayHeldBack = try count("goaway_held_back", 0...1000) ?? 0
        closeAfter = try count("close_after", 1...1_000_000_000)
        maxConcurrentStreams = try count("max_concurrent_streams", 1...1_000_000) ?? 1000
        silentAfter = try count("silent_after", 0...1_000_000_000)
        if let changes = members["stream_limits"] {
            guard case .array(let pairs) = changes else {
                throw .init("stream_limits must be an array of [after, limit] pairs")
            }
            for pair in pairs {
                guard case .array(let items) = pair, items.count == 2, case .int(let after) = items[0],
                    case .int(let limit) = items[1], after >= 0, (1...1_000_000).contains(limit)
                else { throw .init("each stream_limits entry must be [after >= 0, limit 1...1000000]") }
                streamLimitChanges.append(StreamLimitChange(after: Int(after), limit: Int(limit)))
            }
            streamLimitChanges.sort { $0.after < $1.after }
        }
        if let goAwayAfter, goAwayHeldBack >= goAwayAfter {
            throw .init("goaway_held_back must be less than goaway_after")
        }
    }

    /// As JSON, in the shape `init(json:)` reads.
    public var json: JSONValue {
        var members: [String: JSONValue] = ["max_concurrent_streams": .int(Int64(maxConcurrentStreams))]
        if let goAwayAfter {
            members["goaway_after"] = .int(Int64(goAwayAfter))
            members["goaway_held_back"] = .int(Int64(goAwayHeldBack))
        }
        if let closeAfter { members["close_after"] = .int(Int64(closeAfter)) }
        if let silentAfter { members["silent_after"] = .int(Int64(silentAfter)) }
        if !streamLimitChanges.isEmpty {
            members["stream_limits"] = .array(
                streamLimitChanges.map { .array([.int(Int64($0.after)), .int(Int64($0.limit))]) })
        }
        return .object(members)
    }
}
