import ArgumentParser
import Essentials

/// `push-sender`: send, check, simulate pushes, and run a local APNs-compatible server.
@main
struct PushSender: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-sender",
        abstract: "Send APNs and FCM pushes, check their staleness, simulate the phone, and run a mock APNs or FCM.",
        discussion: """
            Exit status: 0 success; 1 some push failed (send, push) or the payload is stale (check); 2 no usable timestamp \
            (check); 3 the payload is not valid (check, simulate); 64 bad arguments.
            """,
        version: BuildInfo.version,
        subcommands: [
            Send.self, Push.self, Check.self, Simulate.self, Channels.self, Broadcast.self, MockAPNsCommand.self,
            MockFCMCommand.self,
        ])
}
