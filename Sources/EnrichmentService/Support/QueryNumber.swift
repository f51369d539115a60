/// Numbers in query parameters, read strictly: plain decimal digits, as a person writes them in a URL.
///
/// Swift's `Double(_:)` and `Int(_:)` also take `+1`, `0x10`, `1e3`, `inf` and `nan`; a parameter that takes some
/// of those and refuses others cannot be explained in one sentence, so the API takes none of them.
enum QueryNumber {
    /// `30`, `2.5`, `0.25`: 1 to 6 digits, then at most 3 decimals; nil otherwise.
    static func seconds(_ text: String) -> Double? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, (1...6).contains(whole.count), whole.allSatisfy(\.isASCIIDigit) else {
            return nil
        }
        if parts.count == 2 {
            guard (1...3).contains(parts[1].count), parts[1].allSatisfy(\.isASCIIDigit) else { return nil }
        }
        return Double(text)
    }

    /// `0` to `999999999`: digits only; nil otherwise.
    static func integer(_ text: String) -> Int? {
        guard (1...9).contains(text.count), text.allSatisfy(\.isASCIIDigit) else { return nil }
        return Int(text)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
