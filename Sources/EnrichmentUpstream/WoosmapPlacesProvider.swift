public import AsyncHTTPClient
public import EnrichmentCore
public import Essentials
import Foundation
import NIOCore
import NIOHTTP1

/// The Woosmap Search API (or any compatible endpoint) as a places provider.
///
/// `GET {base}/stores/search/?private_key=KEY&lat=..&lng=..&stores_by_page=N[&radius=..][&query=..]`.
/// The key travels only in the request; it is never part of an error or log message.
public struct WoosmapPlacesProvider: PlacesProvider {
    public let name = "woosmap"
    let client: HTTPClient
    let baseURL: String
    let apiKey: Secret?
    let timeout: TimeAmount
    /// Largest response body read, in bytes.
    static let maximumBody = 4 * 1024 * 1024

    /// Creates a provider; `timeout` bounds one request (the enricher's deadline bounds the whole step).
    public init(client: HTTPClient, baseURL: String, apiKey: Secret?, timeout: Duration = .seconds(1)) {
        self.client = client
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.apiKey = apiKey
        let components = timeout.components
        self.timeout = .nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
    }

    /// The request URL for a search (contains the key: do not log it).
    func url(for point: Coordinate, query: PlacesQuery) -> String {
        var items = [URLQueryItem]()
        if let apiKey { items.append(URLQueryItem(name: "private_key", value: apiKey.exposed)) }
        items.append(URLQueryItem(name: "lat", value: String(point.latitude)))
        items.append(URLQueryItem(name: "lng", value: String(point.longitude)))
        items.append(URLQueryItem(name: "stores_by_page", value: String(query.limit)))
        if let radius = query.radius {
            items.append(URLQueryItem(name: "radius", value: String(Int(radius.rounded(.up)))))
        }
        if let filter = query.filter { items.append(URLQueryItem(name: "query", value: filter.description)) }
        var components = URLComponents()
        components.queryItems = items
        let encoded = (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        return "\(baseURL)/stores/search/?\(encoded)"
    }

    public func nearest(to point: Coordinate, query: PlacesQuery) async throws(PlacesError) -> [PlaceMatch] {
        var request = HTTPClientRequest(url: url(for: point, query: query))
        request.method = .GET
        request.headers.add(name: "Accept", value: "application/json")
        let body: ByteBuffer
        do {
            let response = try await client.execute(request, timeout: timeout)
            guard response.status.code == 200 else { throw PlacesError.httpStatus(Int(response.status.code)) }
            body = try await response.body.collect(upTo: Self.maximumBody)
        } catch let error as PlacesError {
            throw error
        } catch let error as HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                throw .timeout(seconds: Double(timeout.nanoseconds) / 1e9)
            default:
                throw .transport(String(describing: error))
            }
        } catch is NIOTooManyBytesError {
            throw .invalidResponse("body larger than \(Self.maximumBody) bytes")
        } catch {
            throw .transport(Self.describe(error))
        }
        let document: JSONValue
        do {
            document = try JSONValue.decode(Data(body.readableBytesView))
        } catch {
            throw .invalidResponse("not JSON")
        }
        let parsed: (pois: [POI], distances: [Double?], rejected: [WoosmapFormat.FeatureProblem])
        do { parsed = try WoosmapFormat.parseFeatureCollection(document) } catch {
            throw .invalidResponse(error.description)
        }
        var matches: [PlaceMatch] = []
        matches.reserveCapacity(parsed.pois.count)
        for (index, (poi, distance)) in zip(parsed.pois, parsed.distances).enumerated() {
            // A distance nobody on Earth can be at is upstream nonsense: degrade rather than format it.
            if let distance, !PlaceMatch.plausibleDistances.contains(distance) {
                throw .invalidResponse(
                    "feature \(index) has distance \(distance); expected metres in [0, \(Int(PlaceMatch.plausibleDistances.upperBound))]"
                )
            }
            matches.append(PlaceMatch(poi: poi, distance: distance ?? point.distance(to: poi.coordinate)))
        }
        // Woosmap sorts by distance; make sure, since "nearest first" is our contract.
        matches.sort { $0.distance < $1.distance }
        return Array(matches.prefix(query.limit))
    }

    static func describe(_ error: any Error) -> String {
        if let channel = error as? ChannelError { return "\(channel)" }
        return String(describing: error)
    }
}
