import Essentials
import Foundation
import MockAPNs
import TestSupport
import Testing

@Suite("push-sender channels and broadcast against the mock")
struct ChannelsCLITests {
    @Test("create, list, read, broadcast, delete: the answers a user reads, and the refusals")
    func lifecycle() async throws {
        try await withMock { base, state in
            let files = try CredentialFiles()
            defer { files.remove() }
            let common = [
                "--host", base, "--ca", files.ca, "--key", files.key, "--key-id", "KEYID12345", "--team-id",
                "TEAMID6789", "--bundle-id", "com.example.app",
            ]
            let created = try runPushSender(["channels", "create", "--storage-policy", "most-recent"] + common)
            #expect(created.status == 0, "\(created.err)")
            let channelID = created.out.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(state.broadcastChannels.map(\.id) == [channelID])
            #expect(state.broadcastChannels.first?.messageStoragePolicy == 1)

            let listed = try runPushSender(["channels", "list", "--json"] + common)
            #expect(listed.status == 0)
            #expect(try JSONParser.parse(Array(listed.out.utf8))["channels"] == .array([.string(channelID)]))
            let read = try runPushSender(["channels", "read", "--channel-id", channelID] + common)
            #expect(read.out.contains("most-recent"))

            let update = #"{"aps":{"event":"update","content-state":{"eta":4}}}"#
            let sent = try runPushSender(
                [
                    "broadcast", "--channel-id", channelID, "--stamp-now", "--priority", "5", "--payload-json", update,
                    "--json",
                ] + common)
            #expect(sent.status == 0, "\(sent.err)")
            #expect(try JSONParser.parse(Array(sent.out.utf8))["apns_unique_id"]?.stringValue?.isEmpty == false)
            let broadcast = try #require(state.receivedBroadcasts.last)
            #expect(broadcast.priority == "5")
            #expect(broadcast.expiration == "0")
            let stamped = try JSONParser.parse(broadcast.payload)["aps"]?["timestamp"]
            if case .int(let seconds)? = stamped {
                #expect(abs(seconds - Int64(Date().timeIntervalSince1970)) < 60)
            } else {
                Issue.record("aps.timestamp missing: \(String(describing: stamped))")
            }

            // Refused before sending: a start, no timestamp.
            let start = try runPushSender(
                [
                    "broadcast", "--channel-id", channelID, "--stamp-now", "--payload-json",
                    #"{"aps":{"event":"start","content-state":{},"alert":"x","attributes-type":"A","attributes":{}}}"#,
                ]
                    + common)
            #expect(start.status == 3)
            #expect(start.err.contains("cannot start an activity"))
            let unstamped = try runPushSender(
                ["broadcast", "--channel-id", channelID, "--payload-json", update] + common)
            #expect(unstamped.status == 3)
            #expect(unstamped.err.contains("aps.timestamp"))
            #expect(state.receivedBroadcasts.count == 1)

            let deleted = try runPushSender(["channels", "delete", "--channel-id", channelID] + common)
            #expect(deleted.status == 0)
            let gone = try runPushSender(["channels", "read", "--channel-id", channelID] + common)
            #expect(gone.status == 1)
            #expect(gone.err.contains("400 ChannelNotRegistered"))
            #expect(gone.err.contains("list the app's channels"))

            let suffixed = try runPushSender(
                ["channels", "list", "--host", base, "--bundle-id", "com.example.app.push-type.liveactivity"])
            #expect(suffixed.status == 64)
            #expect(suffixed.err.contains("without '.push-type.liveactivity'"))
        }
    }
}
