import APNsCore
import NIOCore
import NIOPosix
import NIOSSL

/// The connections to one APNs host and the pushes waiting for them, all on one event loop.
///
/// Keeps `target` connections taking new streams: a connection that drains (GOAWAY) is replaced at once, before it
/// is gone. Pushes go to the connection with the most free streams; pushes a server did not process go again at
/// once; pushes lost with a connection go again on another, as a new attempt (they may have been delivered).
final class APNsConnectionPool: @unchecked Sendable {
    let loop: any EventLoop
    private let host: String
    private let port: Int
    private let sslContext: NIOSSLContext
    private let serverHostname: String?
    private let configuration: APNsSenderConfiguration
    private let authority: String
    /// Most streams opened on one connection, whatever the server allows.
    let streamCap = 1000
    let tick: TimeAmount
    let pingInterval: TimeAmount
    let pingTimeout: TimeAmount
    /// How long a connection may take to be ready: TCP, TLS and the server's first SETTINGS.
    let connectTimeout: TimeAmount

    private var connections: [APNsConnection] = []
    private var connectionCounter = 0
    private var batches: [PushBatch] = []
    private var roundRobin = 0
    private var pumping = false
    private var pumpAgain = false
    private var consecutiveConnectFailures = 0
    private var reconnectScheduled = false
    private var shutDown = false
    /// What happened to connections so far; read with `APNsSender.statistics()`.
    private(set) var statistics = APNsSenderStatistics()

    init(
        loop: any EventLoop, host: String, port: Int, authority: String, sslContext: NIOSSLContext,
        configuration: APNsSenderConfiguration
    ) {
        self.loop = loop
        self.host = host
        self.port = port
        self.authority = authority
        self.sslContext = sslContext
        // SNI takes host names only, not IP addresses.
        serverHostname = host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" } ? nil : host
        self.configuration = configuration
        pingInterval = configuration.pingInterval
        pingTimeout = configuration.pingTimeout
        connectTimeout = configuration.connectTimeout
        let finest = min(configuration.requestTimeout, pingTimeout, pingInterval, connectTimeout)
        tick = max(.milliseconds(10), min(.seconds(1), .nanoseconds(finest.nanoseconds / 4)))
    }

    // MARK: Batches

    /// Starts sending a batch (on the loop); its promise completes when every request has a result.
    func submit(_ batch: PushBatch) {
        loop.preconditionInEventLoop()
        guard batch.count > 0 else {
            batch.promise.succeed()
            return
        }
        batches.append(batch)
        pump()
    }

    /// Puts waiting pushes on connections with free streams, then flushes each connection once.
    func pump() {
        if pumping {
            pumpAgain = true
            return
        }
        pumping = true
        defer { pumping = false }
        repeat {
            pumpAgain = false
            ensureConnections()
            var authorization: String?? = .none
            outer: while !batches.isEmpty {
                var progressed = false
                for _ in 0..<batches.count {
                    guard !batches.isEmpty else { break outer }
                    roundRobin = (roundRobin + 1) % batches.count
                    let batch = batches[roundRobin]
                    guard batch.hasWork else { continue }
                    guard let connection = roomiest() else { break outer }
                    guard let job = batch.take() else { continue }
                    if authorization == nil {
                        switch bearer() {
                        case .success(let value): authorization = .some(value)
                        case .failure(let message):
                            finish(job, transportError: message)
                            progressed = true
                            continue
                        }
                    }
                    connection.send(
                        job, request: batch[job.index], authorization: authorization ?? nil,
                        payload: batch.payloads[job.index], timeout: configuration.requestTimeout)
                    progressed = true
                }
                if !progressed { break }
            }
            // Also flushes what connections wrote themselves while reading (WINDOW_UPDATE).
            for connection in connections { connection.flushIfNeeded() }
        } while pumpAgain
    }

    /// The ready connection with the most free streams.
    private func roomiest() -> APNsConnection? {
        var best: APNsConnection?
        for connection in connections where connection.capacity > (best?.capacity ?? 0) { best = connection }
        return best
    }

    private enum Bearer {
        case success(String?)
        case failure(String)
    }

    private func bearer() -> Bearer {
        guard case .token(let manager) = configuration.credentials else { return .success(nil) }
        do { return .success("bearer \(try manager.token())") } catch {
            return .failure("cannot sign the provider token: \(error)")
        }
    }

    // MARK: Outcomes (called by connections)

    func answered(_ job: PushJob, by connection: APNsConnection, response: APNsResponse) {
        if response.reason == .expiredProviderToken, !job.refreshedToken,
            case .token(let manager) = configuration.credentials
        {
            manager.invalidate()
            var again = job
            again.refreshedToken = true
            job.batch.again.append(again)
            return
        }
        if let delay = configuration.retry.delay(
            afterAttempt: job.attempt, status: response.status, reason: response.reason)
        {
            later(job, after: delay)
            return
        }
        finish(
            job,
            APNsSendResult(
                deviceToken: job.batch[job.index].deviceToken, status: response.status,
                reason: response.reason, apnsID: response.apnsID, timestamp: response.timestamp,
                attempts: job.attempt, transportError: nil))
    }

    /// The stream failed (timeout, reset by the server): a transport failure, retried per the policy.
    func failed(_ job: PushJob, by connection: APNsConnection, error: APNsTransportError) {
        if error == .timeout { statistics.timeouts += 1 }
        var job = job
        job.mayHaveReachedPeer = true
        if let delay = configuration.retry.delayAfterTransportError(attempt: job.attempt) {
            later(job, after: delay)
        } else {
            finish(job, transportError: error.description)
        }
    }

    /// Not processed by the server (GOAWAY above its last stream id, REFUSED_STREAM): sent again at once, elsewhere,
    /// not counted as an attempt.
    func refused(_ jobs: [PushJob], by connection: APNsConnection) {
        statistics.resentUnprocessed += jobs.count
        for var job in jobs {
            job.refusals += 1
            if job.refusals > 16 {
                // The last GOAWAY's words, when it had some (APNs gives its reason there).
                finish(job, transportError: message(.refusedTooOften, on: connection))
            } else {
                job.batch.again.append(job)
            }
        }
        pump()
    }

    func connectionReady(_ connection: APNsConnection) {
        consecutiveConnectFailures = 0
        pump()
    }

    func capacityChanged(_ connection: APNsConnection) { pump() }

    func connectionDraining(_ connection: APNsConnection) {
        statistics.drained += 1
        // The replacement opens now, while the old connection still answers its streams.
        pump()
    }

    func connectionClosed(_ connection: APNsConnection, wasReady: Bool, lost: [PushJob]) {
        connections.removeAll { $0 === connection }
        if shutDown {
            for job in lost { finish(job, transportError: "the sender was shut down") }
            return
        }
        // In flight when the connection went: they may have been delivered, so each goes again as a new attempt
        // (never more than the policy allows), at once and on another connection.
        statistics.lostWithConnection += lost.count
        for var job in lost {
            job.mayHaveReachedPeer = true
            if job.attempt < configuration.retry.maxAttempts {
                var again = job
                again.attempt += 1
                job.batch.again.append(again)
            } else {
                // Why the connection went, when it is known (a protocol breach, an unanswered PING, TLS).
                finish(job, transportError: message(.closedBeforeAnswer, on: connection))
            }
        }
        if connection.failure as? APNsTransportError == .pingUnanswered { statistics.unansweredPings += 1 }
        if !wasReady {
            connectFailed(connection.failure)
        }
        pump()
    }

    /// A transport error's words, followed by why its connection failed when that is known.
    private func message(_ error: APNsTransportError, on connection: APNsConnection) -> String {
        error.description + (connection.failure.map { " (\($0))" } ?? "")
    }

    // MARK: Connections

    /// Opens connections until `target` take (or will take) new streams, while there is work to do.
    private func ensureConnections() {
        guard !shutDown, !reconnectScheduled, batches.contains(where: \.hasWork) else { return }
        var live = connections.filter { $0.state == .ready || $0.state == .connecting }.count
        while live < configuration.connections {
            open()
            live += 1
        }
    }

    private func open() {
        connectionCounter += 1
        statistics.connectionsOpened += 1
        let connection = APNsConnection(number: connectionCounter, pool: self, authority: authority)
        connections.append(connection)
        let sslContext = self.sslContext
        let serverHostname = self.serverHostname
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname))
                    try sync.addHandler(connection)
                }
            }
        bootstrap.connect(host: host, port: port).whenFailure { error in
            // Never connected: no handler saw it, so report it here.
            self.connections.removeAll { $0 === connection }
            self.connectFailed(error)
            self.pump()
        }
    }

    /// A connection failed before the server's SETTINGS: fails the waiting pushes when the failure is one that
    /// trying again cannot fix (TLS, refused) or keeps happening; otherwise connects again after a pause.
    private func connectFailed(_ error: (any Error)?) {
        consecutiveConnectFailures += 1
        let problem = ConnectProblem(error, host: host, port: port, names: configuration.settingNames)
        let hasReady = connections.contains { $0.state == .ready }
        if hasReady { return }
        if problem.isDefinitive || consecutiveConnectFailures >= configuration.retry.maxAttempts {
            failWaiting(problem.message)
            consecutiveConnectFailures = 0
            return
        }
        reconnectScheduled = true
        let delay = configuration.retry.delayAfterTransportError(attempt: consecutiveConnectFailures) ?? 0.5
        loop.scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) {
            self.reconnectScheduled = false
            self.pump()
        }
    }

    /// Every push not on the wire fails with `message` (those on the wire keep their own outcome).
    private func failWaiting(_ message: String) {
        for batch in batches {
            while let job = batch.again.popFirst() { finish(job, transportError: message) }
            while batch.nextNew < batch.count {
                let index = batch.nextNew
                batch.nextNew += 1
                batch.active += 1
                finish(PushJob(batch: batch, index: index, attempt: 0), transportError: message)
            }
        }
    }

    // MARK: Results

    private func later(_ job: PushJob, after seconds: Double) {
        var next = job
        next.attempt += 1
        let again = next
        loop.scheduleTask(in: .nanoseconds(Int64(seconds * 1e9))) {
            if self.shutDown {
                self.finish(again, transportError: "the sender was shut down")
            } else {
                job.batch.again.append(again)
                self.pump()
            }
        }
    }

    private func finish(_ job: PushJob, transportError: String) {
        var result = APNsSendResult(
            deviceToken: job.batch[job.index].deviceToken, status: nil, reason: nil, apnsID: nil,
            timestamp: nil, attempts: job.attempt, transportError: transportError)
        result.mayHaveReachedPeer = job.mayHaveReachedPeer
        finish(job, result)
    }

    private func finish(_ job: PushJob, _ result: APNsSendResult) {
        let batch = job.batch
        batch.active -= 1
        batch.finished += 1
        batch.onResult(job.index, result)
        if batch.finished == batch.count {
            batches.removeAll { $0 === batch }
            batch.promise.succeed()
        }
    }

    /// Closes every connection; pushes still waiting fail.
    func shutdown() -> EventLoopFuture<Void> {
        loop.flatSubmit {
            self.shutDown = true
            self.failWaiting("the sender was shut down")
            let closing = self.connections.map { $0.close() }
            return EventLoopFuture.andAllComplete(closing, on: self.loop)
        }
    }
}

/// Counts of what the sender's connections went through, for summaries and tests.
public struct APNsSenderStatistics: Sendable, Equatable {
    /// Connections opened (the first ones and every replacement).
    public var connectionsOpened = 0
    /// Connections that stopped taking new streams before closing (GOAWAY, stream ids used up).
    public var drained = 0
    /// Pushes the server did not process (above a GOAWAY's last stream id, or REFUSED_STREAM), sent again at once.
    public var resentUnprocessed = 0
    /// Pushes in flight on a connection that closed: sent again as a new attempt (they may have been delivered).
    public var lostWithConnection = 0
    /// Requests that got no answer in time (their streams were reset).
    public var timeouts = 0
    /// Connections closed because a PING went unanswered.
    public var unansweredPings = 0

    public init() {}

    /// Adds another shard's counts.
    mutating func add(_ other: APNsSenderStatistics) {
        connectionsOpened += other.connectionsOpened
        drained += other.drained
        resentUnprocessed += other.resentUnprocessed
        lostWithConnection += other.lostWithConnection
        timeouts += other.timeouts
        unansweredPings += other.unansweredPings
    }
}
