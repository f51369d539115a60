import Foundation
import NIOCore
import NIOHTTP2
import NIOSSL
import SwiftASN1
import X509

/// One client connection to the mock: counts its pushes and plays the `ConnectionBehaviour` it opened with.
/// Touched only on the connection's event loop (its streams share it).
final class MockConnection: @unchecked Sendable {
    /// What to do with a push that arrived.
    enum Admission {
        /// Answer it (and record it).
        case process
        /// Keep it unanswered and unrecorded: it is above the GOAWAY's last stream id.
        case hold
        /// Ignore it: the connection is going away, closing or silent.
        case drop
    }

    let behaviour: ConnectionBehaviour
    /// The developer account its provider tokens are of (one per connection, as at APNs).
    let team = ConnectionTeam()
    private let channel: any Channel
    private let state: MockAPNsState
    private var pushes = 0
    private var answered = 0
    private var unanswered = 0
    private var lastProcessed = HTTP2StreamID(0)
    private var held: [any Channel] = []
    private var goingAway = false
    private var closing = false
    private var silent = false
    private var nextLimitChange = 0

    /// With certificate authentication: the app the client certificate is for (its subject's
    /// "Apple Push Services: <bundle id>" common name), read once from the TLS handshake.
    private(set) lazy var certificateTopic: String? = {
        guard let handler = try? channel.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self),
            let peer = handler.peerCertificate, let der = try? peer.toDERBytes(),
            let certificate = try? Certificate(derEncoded: der)
        else { return nil }
        for name in certificate.subject {
            for attribute in name where attribute.type == .RDNAttributeType.commonName {
                let text = String(describing: attribute.value)
                if let range = text.range(of: "Apple Push Services: ") { return String(text[range.upperBound...]) }
            }
        }
        return nil
    }()

    init(channel: any Channel, behaviour: ConnectionBehaviour, state: MockAPNsState) {
        self.channel = channel
        self.behaviour = behaviour
        self.state = state
    }

    /// Decides about one push (a complete request on `stream`).
    func admit(streamID: HTTP2StreamID, stream: any Channel) -> Admission {
        guard !goingAway, !closing, !silent else { return .drop }
        pushes += 1
        if let limit = behaviour.closeAfter, pushes > limit { return .drop }
        if let limit = behaviour.silentAfter, pushes > limit { return .drop }
        applyStreamLimitChanges()
        if let goAwayAfter = behaviour.goAwayAfter, behaviour.goAwayHeldBack > 0,
            pushes > goAwayAfter - behaviour.goAwayHeldBack
        {
            held.append(stream)
            if pushes == goAwayAfter { goAway() }
            return .hold
        }
        unanswered += 1
        lastProcessed = max(lastProcessed, streamID)
        if let goAwayAfter = behaviour.goAwayAfter, pushes == goAwayAfter { goAway() }
        return .process
    }

    /// A processed push was answered.
    func didAnswer() {
        unanswered -= 1
        answered += 1
        if let limit = behaviour.closeAfter, answered >= limit, !closing {
            closing = true
            state.noteAbruptClose()
            channel.flush()
            channel.close(promise: nil)
        } else if let limit = behaviour.silentAfter, answered >= limit, !silent {
            goSilent()
        } else if goingAway, unanswered == 0 {
            channel.flush()
            channel.close(promise: nil)
        }
    }

    private func goSilent() {
        silent = true
        state.noteSilence()
        channel.flush()
        channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
    }

    /// GOAWAY(NO_ERROR) naming the last processed stream; held streams are reset, and the connection closes once
    /// every processed push is answered.
    private func goAway() {
        goingAway = true
        state.noteGoAway()
        let frame = HTTP2Frame(
            streamID: .rootStream, payload: .goAway(lastStreamID: lastProcessed, errorCode: .noError, opaqueData: nil))
        channel.writeAndFlush(frame, promise: nil)
        for stream in held { stream.close(promise: nil) }
        held.removeAll()
        if unanswered == 0 {
            channel.flush()
            channel.close(promise: nil)
        }
    }

    private func applyStreamLimitChanges() {
        let changes = behaviour.streamLimitChanges
        var settings: HTTP2Settings = []
        while nextLimitChange < changes.count, pushes >= changes[nextLimitChange].after {
            settings = [HTTP2Setting(parameter: .maxConcurrentStreams, value: changes[nextLimitChange].limit)]
            nextLimitChange += 1
        }
        if !settings.isEmpty {
            channel.writeAndFlush(
                HTTP2Frame(streamID: .rootStream, payload: .settings(.settings(settings))), promise: nil)
        }
    }
}
