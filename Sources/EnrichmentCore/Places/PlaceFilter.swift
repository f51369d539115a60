import Essentials

/// A parsed Woosmap Search API `query` filter: clauses on store fields joined by `AND`, `OR` and `NOT`.
///
/// Supported clauses (Woosmap semantics):
/// `type:"X"` and `tag:"Y"` (the store's types/tags contain the value), `city:"Z"`, `country:"FR"`, `name:"W"`,
/// `idstore:"ID"` (exact, case-sensitive match; `:=` is the same), and `user.FIELD` on `user_properties`
/// (nested with dots) with `:` or `:=` (equal), `:>`, `:<`, `:>=`, `:<=` against a quoted string, a number, or
/// `true`/`false`. `NOT` binds tightest, then `AND`, then `OR`; parentheses group.
public indirect enum PlaceFilter: Sendable, Equatable, CustomStringConvertible {
    case clause(Clause)
    case and(PlaceFilter, PlaceFilter)
    case or(PlaceFilter, PlaceFilter)
    case not(PlaceFilter)

    /// One `field:operator value` test.
    public struct Clause: Sendable, Equatable {
        public var field: Field
        public var comparison: Comparison
        public var value: Value

        public init(field: Field, comparison: Comparison = .equal, value: Value) {
            self.field = field
            self.comparison = comparison
            self.value = value
        }
    }

    /// The store attribute a clause tests.
    public enum Field: Sendable, Equatable {
        case type, tag, city, country, name, idstore
        /// A key path inside `user_properties` (`user.a.b` is `["a", "b"]`).
        case user([String])

        var queryName: String {
            switch self {
            case .type: "type"
            case .tag: "tag"
            case .city: "city"
            case .country: "country"
            case .name: "name"
            case .idstore: "idstore"
            case .user(let path): "user." + path.joined(separator: ".")
            }
        }
    }

    /// How a clause compares; collections (`type`, `tag`) read `equal` as "contains".
    public enum Comparison: String, Sendable, Equatable {
        case equal = "="
        case greater = ">"
        case less = "<"
        case greaterOrEqual = ">="
        case lessOrEqual = "<="
    }

    /// The literal a clause compares with.
    public enum Value: Sendable, Equatable {
        case string(String)
        case number(Double)
        case bool(Bool)
    }

    /// Stores whose `field` equals (or, for types and tags, contains) any of `values`; nil when there are none.
    public static func anyOf(_ field: Field, _ values: [String]) -> PlaceFilter? {
        values.map { PlaceFilter.clause(Clause(field: field, value: .string($0))) }
            .reduce(nil) { partial, next in partial.map { .or($0, next) } ?? next }
    }

    /// All of `filters` (AND), skipping absent ones; nil when none is present.
    public static func all(_ filters: PlaceFilter?...) -> PlaceFilter? {
        filters.compactMap { $0 }.reduce(nil) { partial, next in partial.map { .and($0, next) } ?? next }
    }

    /// The `types`/`tags` shorthands (any of each list) AND-ed with a query: how both the service settings and
    /// `/stores/search/` combine them.
    public static func combining(types: [String], tags: [String], query: PlaceFilter?) -> PlaceFilter? {
        all(anyOf(.type, types), anyOf(.tag, tags), query)
    }

    /// True when `poi` passes the filter.
    public func matches(_ poi: POI) -> Bool {
        withUnsafePointer(to: poi) { matches(at: $0) }
    }

    /// True when the POI at `poi` passes; reads only the fields the clauses test, where passing the POI by value
    /// out of the index's storage would copy the whole of it per test (ten times the cost of the test).
    public func matches(at poi: UnsafePointer<POI>) -> Bool {
        switch self {
        case .clause(let clause): clause.matches(at: poi)
        case .and(let lhs, let rhs): lhs.matches(at: poi) && rhs.matches(at: poi)
        case .or(let lhs, let rhs): lhs.matches(at: poi) || rhs.matches(at: poi)
        case .not(let inner): !inner.matches(at: poi)
        }
    }

    /// The filter in Woosmap query syntax (what is sent upstream), fully parenthesised where precedence needs it.
    public var description: String {
        switch self {
        case .clause(let clause): clause.description
        case .and(let lhs, let rhs): "\(lhs.operand(under: 2)) AND \(rhs.operand(under: 2))"
        case .or(let lhs, let rhs): "\(lhs.operand(under: 1)) OR \(rhs.operand(under: 1))"
        case .not(let inner): "NOT \(inner.operand(under: 3))"
        }
    }

    private var precedence: Int {
        switch self {
        case .or: 1
        case .and: 2
        case .not, .clause: 3
        }
    }

    private func operand(under parent: Int) -> String {
        precedence < parent ? "(\(description))" : description
    }
}

extension PlaceFilter.Clause: CustomStringConvertible {
    public var description: String {
        let op: String =
            switch field {
            case .type, .tag: ""
            case .user: comparison == .equal ? "" : comparison.rawValue
            default: "="
            }
        return "\(field.queryName):\(op)\(value.literal)"
    }

    func matches(at poi: UnsafePointer<POI>) -> Bool {
        if case .user(let path) = field {
            return Self.compare(poi.pointee.userProperties?[path: path], comparison, value)
        }
        // The parser gives the store's own fields string values only.
        guard case .string(let text) = value else { return false }
        switch field {
        case .type: return poi.pointee.types.contains(text)
        case .tag: return poi.pointee.tags.contains(text)
        case .city: return poi.pointee.address.city == text
        case .country: return poi.pointee.address.countryCode == text
        case .name: return poi.pointee.name == text
        case .idstore: return poi.pointee.storeId == text
        case .user: return false
        }
    }

    /// A user property passes when it (or, for an array, any element) compares true with the literal;
    /// values of another JSON type never match.
    static func compare(_ property: JSONValue?, _ comparison: PlaceFilter.Comparison, _ value: PlaceFilter.Value)
        -> Bool
    {
        guard let property else { return false }
        if case .array(let elements) = property { return elements.contains { compare($0, comparison, value) } }
        switch (property, value) {
        case (.string(let lhs), .string(let rhs)): return ordered(lhs, rhs, comparison)
        case (.int(let lhs), .number(let rhs)): return ordered(Double(lhs), rhs, comparison)
        case (.double(let lhs), .number(let rhs)): return ordered(lhs, rhs, comparison)
        case (.bool(let lhs), .bool(let rhs)): return comparison == .equal && lhs == rhs
        default: return false
        }
    }

    private static func ordered<T: Comparable>(_ lhs: T, _ rhs: T, _ comparison: PlaceFilter.Comparison) -> Bool {
        switch comparison {
        case .equal: lhs == rhs
        case .greater: lhs > rhs
        case .less: lhs < rhs
        case .greaterOrEqual: lhs >= rhs
        case .lessOrEqual: lhs <= rhs
        }
    }
}

extension PlaceFilter.Value {
    /// The value as written in a query: quoted and escaped strings, integral numbers without a fraction.
    var literal: String {
        switch self {
        case .bool(let value): return value ? "true" : "false"
        case .number(let value):
            if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
            return String(value)
        case .string(let value):
            var escaped = "\""
            for character in value {
                if character == "\"" || character == "\\" { escaped.append("\\") }
                escaped.append(character)
            }
            return escaped + "\""
        }
    }
}

extension JSONValue {
    /// The value at a key path through nested objects, or nil.
    subscript(path path: [String]) -> JSONValue? {
        var current: JSONValue? = self
        for key in path { current = current?[key] }
        return current
    }
}
