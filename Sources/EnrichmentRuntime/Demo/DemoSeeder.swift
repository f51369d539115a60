import AsyncHTTPClient
public import Essentials
import Foundation
import NIOCore
import NIOHTTP1

/// Seeds the demo (`DemoData`) through a running service's own HTTP API, so that the data is what the API makes
/// of it: ids checked, fixes stored and evaluated, visits turned into zones of interest, tags set at registration.
public struct DemoSeeder: Sendable {
    /// `http://host:port` of the running service.
    public let baseURL: String
    /// Sent as `Authorization: Bearer` when the service requires a key (`ENRICH_API_KEY`); never logged.
    public let apiKey: Secret?

    public init(baseURL: String, apiKey: Secret?) {
        self.baseURL = baseURL
        self.apiKey = apiKey
    }

    /// The URL to reach a service listening on `host` (an address of every interface is reached on loopback).
    public static func baseURL(host: String, port: Int) -> String {
        switch host {
        case "0.0.0.0", "": return "http://127.0.0.1:\(port)"
        case "::", "[::]": return "http://[::1]:\(port)"
        default:
            return host.contains(":") && !host.hasPrefix("[") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)"
        }
    }

    /// What one seeding made.
    public struct Report: Sendable {
        public var devices: Int
        public var visits: Int
        public var fixes: Int
    }

    /// Sends every request of the seeding at `now` (epoch seconds), in order; throws at the first refusal.
    @discardableResult
    public func seed(now: Double) async throws -> Report {
        var report = Report(devices: DemoData.deviceIDs.count, visits: 0, fixes: 0)
        for request in DemoData.requests(now: now) {
            try await send(request)
            if request.path.hasSuffix("/visits") { report.visits += request.expectedAccepted ?? 0 }
            if request.path.hasSuffix("/locations") { report.fixes += 1 }
        }
        return report
    }

    /// Reports each demo device's fix again at `now`.
    public func refreshFixes(now: Double) async throws {
        for request in DemoData.fixRequests(now: now) { try await send(request) }
    }

    func send(_ request: DemoData.Request) async throws {
        var outgoing = HTTPClientRequest(url: baseURL + request.path)
        outgoing.method = HTTPMethod(rawValue: request.method)
        if let apiKey { outgoing.headers.add(name: "authorization", value: "Bearer \(apiKey.exposed)") }
        if let body = request.body {
            outgoing.headers.add(name: "content-type", value: "application/json")
            outgoing.body = .bytes(ByteBuffer(bytes: JSONWriter.bytes(body)))
        }
        let response: HTTPClientResponse
        let answer: ByteBuffer
        do {
            response = try await HTTPClient.shared.execute(outgoing, timeout: .seconds(30))
            answer = try await response.body.collect(upTo: 1 << 20)
        } catch {
            throw DemoSeedError(request: request, status: nil, answer: "\(error)")
        }
        let text = String(buffer: answer)
        guard (200..<300).contains(response.status.code) else {
            throw DemoSeedError(request: request, status: Int(response.status.code), answer: text)
        }
        if let expected = request.expectedAccepted {
            let accepted = (try? JSONValue.decode(Data(text.utf8)))?["accepted"]
            guard accepted == .int(Int64(expected)) else {
                throw DemoSeedError(
                    request: request, status: Int(response.status.code),
                    answer: "accepted \(accepted.map { "\($0)" } ?? "nothing") of \(expected): \(text)")
            }
        }
    }
}

/// A seeding request the service refused or could not answer.
public struct DemoSeedError: Error, CustomStringConvertible {
    public let request: DemoData.Request
    /// The HTTP status; nil when the service could not be reached.
    public let status: Int?
    public let answer: String

    public var description: String {
        let what = "the demo could not seed its data (\(request.method) \(request.path))"
        guard let status else { return "\(what): the service did not answer: \(answer)" }
        if status == 401 || status == 403 {
            return "\(what): \(status): the demo seeds with ENRICH_API_KEY (an admin key), and with keys in "
                + "ENRICH_APPS_FILE but no ENRICH_API_KEY it has none: set ENRICH_API_KEY, or run the demo without "
                + "ENRICH_APPS_FILE"
        }
        return "\(what): \(status) \(answer.prefix(500))"
    }
}
