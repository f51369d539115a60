import AsyncHTTPClient
public import Essentials
public import Foundation
import NIOCore
import NIOFoundationCompat
public import NIOHTTP1

/// A small JSON client for tests, over AsyncHTTPClient (real HTTP on loopback).
public struct ServiceClient: Sendable {
    public let base: String

    public init(base: String) { self.base = base }

    /// Redirects are answers to check, not to follow (a test sees the 303 and its Set-Cookie).
    static let client = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))

    public struct Reply: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: Data
        public var json: JSONValue? { try? JSONValue.decode(body) }
        public var text: String { String(decoding: body, as: UTF8.self) }
        public var errorReason: String? { json?["error"]?["reason"]?.stringValue }
    }

    public func request(
        _ method: HTTPMethod, _ path: String, body: Data? = nil, contentType: String = "application/json",
        headers: [String: String] = [:]
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let body {
            request.body = .bytes(ByteBuffer(data: body))
            request.headers.add(name: "Content-Type", value: contentType)
        }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await Self.client.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 64 << 20)
        var flat: [String: String] = [:]
        for header in response.headers { flat[header.name.lowercased()] = header.value }
        return Reply(status: Int(response.status.code), headers: flat, body: Data(bytes.readableBytesView))
    }

    public func post(_ path: String, json: String, headers: [String: String] = [:]) async throws -> Reply {
        try await request(.POST, path, body: Data(json.utf8), headers: headers)
    }

    /// A form post (`application/x-www-form-urlencoded`), as a browser sends one.
    public func postForm(_ path: String, _ form: String, headers: [String: String] = [:]) async throws -> Reply {
        try await request(
            .POST, path, body: Data(form.utf8), contentType: "application/x-www-form-urlencoded", headers: headers)
    }

    public func get(_ path: String, headers: [String: String] = [:]) async throws -> Reply {
        try await request(.GET, path, headers: headers)
    }

    public func put(_ path: String, json: String, headers: [String: String] = [:]) async throws -> Reply {
        try await request(.PUT, path, body: Data(json.utf8), headers: headers)
    }

    public func delete(_ path: String, headers: [String: String] = [:]) async throws -> Reply {
        try await request(.DELETE, path, headers: headers)
    }
}
