/// Why a `query` filter could not be read: what was expected, and where (1-based character position).
public struct PlaceFilterSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    public var position: Int
    public var message: String

    public init(position: Int, message: String) {
        self.position = position
        self.message = message
    }

    public var description: String { "query: \(message) at position \(position)" }
}

extension PlaceFilter {
    /// Longest query accepted, in characters.
    public static let maximumLength = 2_000
    /// Deepest nesting of parentheses and `NOT` accepted.
    public static let maximumDepth = 32

    /// Parses Woosmap query syntax, e.g. `type:"cafe" AND (tag:"wifi" OR user.rating:>=4)`.
    ///
    /// Keywords `AND`, `OR`, `NOT` are case-insensitive. String values must be double-quoted (`\"` and `\\`
    /// escape inside them); numbers and `true`/`false` are bare.
    public static func parse(_ text: String) throws(PlaceFilterSyntaxError) -> PlaceFilter {
        var parser = Parser(characters: Array(text))
        guard parser.characters.count <= maximumLength else {
            throw PlaceFilterSyntaxError(
                position: maximumLength + 1, message: "query is longer than \(maximumLength) characters")
        }
        parser.skipSpaces()
        guard !parser.atEnd else { throw parser.error("query is empty; expected a clause such as type:\"cafe\"") }
        let filter = try parser.parseOr(depth: 0)
        parser.skipSpaces()
        guard parser.atEnd else {
            if parser.peek == ")" { throw parser.error("unbalanced ')'") }
            throw parser.error("expected AND or OR between clauses")
        }
        return filter
    }

    struct Parser {
        let characters: [Character]
        var index = 0

        var atEnd: Bool { index >= characters.count }
        var peek: Character? { atEnd ? nil : characters[index] }

        func error(_ message: String, at position: Int? = nil) -> PlaceFilterSyntaxError {
            PlaceFilterSyntaxError(position: (position ?? index) + 1, message: message)
        }

        mutating func skipSpaces() {
            while let c = peek, c.isWhitespace { index += 1 }
        }

        static func isWordCharacter(_ c: Character) -> Bool {
            c.isLetter || c.isNumber || c == "_" || c == "-" || c == "."
        }

        /// The keyword at the cursor (`AND`, `OR`, `NOT`) when followed by a space, `(`, `"` or the end.
        func keyword() -> String? {
            var end = index
            while end < characters.count, characters[end].isLetter { end += 1 }
            let word = String(characters[index..<end]).uppercased()
            guard ["AND", "OR", "NOT"].contains(word) else { return nil }
            if end < characters.count, Self.isWordCharacter(characters[end]) || characters[end] == ":" { return nil }
            return word
        }

        mutating func consumeKeyword(_ word: String) -> Bool {
            skipSpaces()
            guard keyword() == word else { return false }
            index += word.count
            return true
        }

        mutating func parseOr(depth: Int) throws(PlaceFilterSyntaxError) -> PlaceFilter {
            var filter = try parseAnd(depth: depth)
            while consumeKeyword("OR") { filter = .or(filter, try parseAnd(depth: depth)) }
            return filter
        }

        mutating func parseAnd(depth: Int) throws(PlaceFilterSyntaxError) -> PlaceFilter {
            var filter = try parseNot(depth: depth)
            while consumeKeyword("AND") { filter = .and(filter, try parseNot(depth: depth)) }
            return filter
        }

        mutating func parseNot(depth: Int) throws(PlaceFilterSyntaxError) -> PlaceFilter {
            guard depth < PlaceFilter.maximumDepth else {
                throw error("query nests deeper than \(PlaceFilter.maximumDepth) levels")
            }
            if consumeKeyword("NOT") { return .not(try parseNot(depth: depth + 1)) }
            skipSpaces()
            if peek == "(" {
                let open = index
                index += 1
                let inner = try parseOr(depth: depth + 1)
                skipSpaces()
                guard peek == ")" else {
                    if atEnd { throw error("'(' at position \(open + 1) is never closed") }
                    throw error("expected ')' or AND/OR")
                }
                index += 1
                return inner
            }
            return .clause(try parseClause())
        }

        mutating func parseClause() throws(PlaceFilterSyntaxError) -> Clause {
            guard !atEnd else { throw error("expected a clause such as type:\"cafe\", found the end of the query") }
            if let word = keyword() { throw error("expected a clause, found the keyword \(word)") }
            let fieldStart = index
            while let c = peek, Self.isWordCharacter(c) { index += 1 }
            let name = String(characters[fieldStart..<index])
            guard !name.isEmpty else {
                throw error(
                    "expected a field name (type, tag, city, country, name, idstore or user.NAME), found '\(peek!)'")
            }
            let field = try Self.field(named: name, at: fieldStart)
            guard peek == ":" else { throw error("expected ':' after the field name \(name)") }
            index += 1
            let operatorStart = index
            var comparison = Comparison.equal
            if let c = peek, c == "=" || c == ">" || c == "<" {
                index += 1
                if c != "=", peek == "=" { index += 1 }
                comparison = Comparison(rawValue: String(characters[operatorStart..<index]))!
            }
            let valueStart = index
            let value = try parseValue()
            try Self.check(
                field: field, comparison: comparison, value: value,
                operatorAt: operatorStart, valueAt: valueStart, name: name)
            return Clause(field: field, comparison: comparison, value: value)
        }

        static func field(named name: String, at position: Int) throws(PlaceFilterSyntaxError) -> Field {
            switch name {
            case "type": return .type
            case "tag": return .tag
            case "city": return .city
            case "country": return .country
            case "name": return .name
            case "idstore": return .idstore
            case "last_updated", "localized":
                throw PlaceFilterSyntaxError(
                    position: position + 1,
                    message: "field \(name) is not supported by the local index")
            default:
                if name.hasPrefix("user.") {
                    let path = name.dropFirst(5).split(separator: ".", omittingEmptySubsequences: false).map(
                        String.init)
                    if path.allSatisfy({ !$0.isEmpty }) { return .user(path) }
                }
                throw PlaceFilterSyntaxError(
                    position: position + 1,
                    message: "unknown field '\(name)'; fields are type, tag, city, country, name, idstore and user.NAME"
                )
            }
        }

        static func check(
            field: Field, comparison: Comparison, value: Value, operatorAt: Int, valueAt: Int,
            name: String
        ) throws(PlaceFilterSyntaxError) {
            if case .user = field {
                if case .bool = value, comparison != .equal {
                    throw PlaceFilterSyntaxError(
                        position: operatorAt + 1,
                        message: "\(comparison.rawValue) cannot compare with true or false; use ':'")
                }
                return
            }
            guard comparison == .equal else {
                throw PlaceFilterSyntaxError(
                    position: operatorAt + 1,
                    message: "\(name) takes no comparison operator; only user.NAME fields accept >, <, >=, <=")
            }
            guard case .string = value else {
                throw PlaceFilterSyntaxError(
                    position: valueAt + 1, message: "\(name) needs a quoted string value, e.g. \(name):\"value\"")
            }
        }

        mutating func parseValue() throws(PlaceFilterSyntaxError) -> Value {
            guard let first = peek, !first.isWhitespace, first != ")" else {
                throw error("expected a value: a \"quoted string\", a number, true or false")
            }
            if first == "\"" {
                let open = index
                index += 1
                var text = ""
                while let c = peek {
                    index += 1
                    if c == "\"" { return .string(text) }
                    if c == "\\" {
                        guard let escaped = peek, escaped == "\"" || escaped == "\\" else {
                            throw error("only \\\" and \\\\ may be escaped in a string", at: index - 1)
                        }
                        text.append(escaped)
                        index += 1
                    } else {
                        text.append(c)
                    }
                }
                throw error("string opened at position \(open + 1) is never closed", at: open)
            }
            let start = index
            while let c = peek, Self.isWordCharacter(c) || c == "+" { index += 1 }
            let word = String(characters[start..<index])
            switch word {
            case "true": return .bool(true)
            case "false": return .bool(false)
            default:
                if Self.isNumber(word), let number = Double(word), number.isFinite { return .number(number) }
                if word.isEmpty { throw error("expected a value: a \"quoted string\", a number, true or false") }
                throw error(
                    "'\(word)' is not a value; put text in double quotes (\"\(word)\"), or write a number, true or false",
                    at: start)
            }
        }

        /// JSON-style number: `-?digits[.digits][e[+-]digits]`.
        static func isNumber(_ word: String) -> Bool {
            var s = Substring(word)
            if s.first == "-" { s = s.dropFirst() }
            func digits() -> Bool {
                let count = s.prefix(while: \.isASCIIDigit).count
                s = s.dropFirst(count)
                return count > 0
            }
            guard digits() else { return false }
            if s.first == "." {
                s = s.dropFirst()
                guard digits() else { return false }
            }
            if s.first == "e" || s.first == "E" {
                s = s.dropFirst()
                if s.first == "+" || s.first == "-" { s = s.dropFirst() }
                guard digits() else { return false }
            }
            return s.isEmpty
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
