public import Essentials
public import Testing

/// Where the service under test keeps its data: the embedded SQLite file or a fresh PostgreSQL database.
public enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres
    public var testDescription: String { rawValue }
}

extension JSONValue {
    /// The array element at `index`, if this is an array that long.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }
}
