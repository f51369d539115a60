public import Essentials

/// A point of interest in the Woosmap store shape.
public struct POI: Sendable, Equatable {
    /// Postal address of a POI.
    public struct Address: Sendable, Equatable {
        public var lines: [String]
        public var countryCode: String?
        public var city: String?
        public var zipcode: String?

        public init(lines: [String] = [], countryCode: String? = nil, city: String? = nil, zipcode: String? = nil) {
            self.lines = lines
            self.countryCode = countryCode
            self.city = city
            self.zipcode = zipcode
        }
    }

    public var storeId: String
    public var name: String
    public var coordinate: Coordinate
    public var address: Address
    public var types: [String]
    public var tags: [String]
    /// Free-form `contact` object, kept as given.
    public var contact: JSONValue?
    /// Free-form `user_properties` object, kept as given.
    public var userProperties: JSONValue?

    public init(
        storeId: String, name: String, coordinate: Coordinate, address: Address = Address(),
        types: [String] = [], tags: [String] = [], contact: JSONValue? = nil, userProperties: JSONValue? = nil
    ) {
        self.storeId = storeId
        self.name = name
        self.coordinate = coordinate
        self.address = address
        self.types = types
        self.tags = tags
        self.contact = contact
        self.userProperties = userProperties
    }
}

/// A POI found by a search, with its great-circle distance from the query point in metres.
///
/// A match from the local index holds the POI's packed record, decoded when `poi` is read: an enrichment reads one
/// POI's fields for its body and writes the rest straight from the record (`PackedPOIRecord`). Read `poi` once
/// where several of its fields are needed.
public struct PlaceMatch: Sendable, Equatable {
    enum Source: Sendable {
        case poi(POI)
        case packed(PackedPOIRecord)
    }

    var source: Source
    public var distance: Double

    public init(poi: POI, distance: Double) {
        source = .poi(poi)
        self.distance = distance
    }

    init(record: PackedPOIRecord, distance: Double) {
        source = .packed(record)
        self.distance = distance
    }

    /// The POI (decoded from its record on each read, for a match from the local index).
    public var poi: POI {
        get {
            switch source {
            case .poi(let poi): poi
            case .packed(let record): record.poi()
            }
        }
        set { source = .poi(newValue) }
    }

    /// The POI's position, read without decoding the rest.
    public var coordinate: Coordinate {
        switch source {
        case .poi(let poi): poi.coordinate
        case .packed(let record): record.coordinate
        }
    }

    /// The POI's store id, read without decoding the rest.
    public var storeId: String {
        switch source {
        case .poi(let poi): poi.storeId
        case .packed(let record): record.storeId
        }
    }

    /// The same match holding its decoded POI (for a caller that reads `poi` many times).
    public var decoded: PlaceMatch {
        guard case .packed(let record) = source else { return self }
        return PlaceMatch(poi: record.poi(), distance: distance)
    }

    public static func == (lhs: PlaceMatch, rhs: PlaceMatch) -> Bool {
        lhs.distance == rhs.distance && lhs.poi == rhs.poi
    }

    /// Great-circle distances that can occur on Earth, in metres (half the circumference is about 20,015 km;
    /// the bound leaves room for providers that measure on another ellipsoid).
    public static let plausibleDistances: ClosedRange<Double> = 0...20_100_000
}

/// What to search for around a point.
public struct PlacesQuery: Sendable, Equatable {
    /// Most POIs to return (Woosmap's `stores_by_page`).
    public var limit: Int
    /// Only POIs within this many metres (great-circle, inclusive), when set.
    public var radius: Double?
    /// Only POIs passing this Woosmap-syntax filter, when set.
    public var filter: PlaceFilter?
    /// False: the local index leaves out each POI's contact and user properties (JSON it would parse for each
    /// match), for a caller that never reads them (a delivery's enrichment: its body and map name only the POI's
    /// name, address and position). Other providers return what they have.
    public var details = true

    /// This query without the POIs' contact and user properties.
    public var withoutDetails: PlacesQuery {
        var query = self
        query.details = false
        return query
    }

    public init(limit: Int = 5, radius: Double? = nil, filter: PlaceFilter? = nil) {
        self.limit = limit
        self.radius = radius
        self.filter = filter
    }

    /// True when `poi` passes the filter.
    public func accepts(_ poi: POI) -> Bool {
        filter?.matches(poi) ?? true
    }

    /// True when no filter is set.
    public var isUnfiltered: Bool { filter == nil }
}

/// Finds POIs near a point: the local index, or an upstream API.
public protocol PlacesProvider: Sendable {
    /// A short name for results and metrics (`local`, `woosmap`).
    var name: String { get }
    /// POIs nearest first, at most `query.limit`.
    func nearest(to point: Coordinate, query: PlacesQuery) async throws(PlacesError) -> [PlaceMatch]
    /// True when answers come from memory without waiting, so no deadline timer is needed.
    var answersImmediately: Bool { get }
    /// What `nearest` answers, when it can be answered without waiting (from memory); nil when it cannot.
    func nearestNow(to point: Coordinate, query: PlacesQuery) -> Result<[PlaceMatch], PlacesError>?
}

extension PlacesProvider {
    public var answersImmediately: Bool { false }
    public func nearestNow(to point: Coordinate, query: PlacesQuery) -> Result<[PlaceMatch], PlacesError>? { nil }
}

/// Why a places search failed.
public enum PlacesError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The upstream answered with a status other than 200.
    case httpStatus(Int)
    /// The upstream did not answer in time.
    case timeout(seconds: Double)
    /// The connection failed (refused, reset, DNS...).
    case transport(String)
    /// The upstream answered 200 with a body that is not a Woosmap FeatureCollection.
    case invalidResponse(String)

    public var description: String {
        switch self {
        case .httpStatus(let status): "places API answered HTTP \(status)"
        case .timeout(let seconds): "places API did not answer within \(seconds) s"
        case .transport(let detail): "places API unreachable: \(detail)"
        case .invalidResponse(let detail): "places API answered with an unreadable body: \(detail)"
        }
    }

    /// A stable machine-readable reason.
    public var reason: String {
        switch self {
        case .httpStatus: "upstream_status"
        case .timeout: "upstream_timeout"
        case .transport: "upstream_unreachable"
        case .invalidResponse: "upstream_invalid_response"
        }
    }
}

/// Stores POIs; the source of truth behind the in-memory index.
public protocol POIStore: Sendable {
    /// Inserts or replaces POIs by store id; returns how many were written.
    func upsert(_ pois: [POI]) async throws -> Int
    /// Inserts or replaces the POIs `chunks` yields, all in one transaction (stored whole or not at all); returns
    /// how many were written. A failure cancels `chunks`.
    func upsert(chunks: POIChunks) async throws -> Int
    /// Every stored POI.
    func all() async throws -> [POI]
    /// Every stored POI, packed for the in-memory index one row at a time (start-up holds the packed bytes, never
    /// every POI as a value).
    func indexBuilder() async throws -> PlacesIndex.Builder
    /// How many POIs are stored.
    func count() async throws -> Int
    /// Nearest POIs using the store's own spatial index (the slow, exact path; the in-memory index is the fast one).
    func nearest(to point: Coordinate, query: PlacesQuery) async throws -> [PlaceMatch]
    /// The POI with this store id, if stored.
    func poi(storeId: String) async throws -> POI?
    /// Removes POIs by store id; returns how many were stored.
    func delete(storeIds: [String]) async throws -> Int
}
