import EnrichmentCore
import Essentials
import Testing

@Suite("Woosmap query filters")
struct PlaceFilterTests {
    typealias F = PlaceFilter

    static func clause(_ field: F.Field, _ value: F.Value, _ comparison: F.Comparison = .equal) -> F {
        .clause(F.Clause(field: field, comparison: comparison, value: value))
    }

    @Test("clauses of every field and operator parse into the expected tree")
    func clauses() throws {
        #expect(try F.parse(#"type:"cafe""#) == Self.clause(.type, .string("cafe")))
        #expect(try F.parse(#"tag:"wifi""#) == Self.clause(.tag, .string("wifi")))
        #expect(try F.parse(#"city:="Paris""#) == Self.clause(.city, .string("Paris")))
        #expect(try F.parse(#"name:"Le \"Zinc\" \\ bar""#) == Self.clause(.name, .string(#"Le "Zinc" \ bar"#)))
        #expect(try F.parse(#"country:"FR""#) == Self.clause(.country, .string("FR")))
        #expect(try F.parse(#"idstore:"s-1""#) == Self.clause(.idstore, .string("s-1")))
        #expect(try F.parse("user.rating:>3") == Self.clause(.user(["rating"]), .number(3), .greater))
        #expect(try F.parse("user.rating:>=3.5") == Self.clause(.user(["rating"]), .number(3.5), .greaterOrEqual))
        #expect(try F.parse("user.rating:<-1e2") == Self.clause(.user(["rating"]), .number(-100), .less))
        #expect(try F.parse("user.rating:<=0") == Self.clause(.user(["rating"]), .number(0), .lessOrEqual))
        #expect(try F.parse("user.open:true") == Self.clause(.user(["open"]), .bool(true)))
        #expect(try F.parse(#"user.a.b:="x""#) == Self.clause(.user(["a", "b"]), .string("x")))
    }

    @Test("NOT binds tighter than AND, AND tighter than OR; parentheses and any keyword case")
    func precedence() throws {
        let a = Self.clause(.type, .string("a"))
        let b = Self.clause(.tag, .string("b"))
        let c = Self.clause(.city, .string("c"))
        #expect(try F.parse(#"type:"a" OR tag:"b" AND city:"c""#) == .or(a, .and(b, c)))
        #expect(try F.parse(#"(type:"a" OR tag:"b") AND city:"c""#) == .and(.or(a, b), c))
        #expect(try F.parse(#"NOT type:"a" AND tag:"b""#) == .and(.not(a), b))
        #expect(try F.parse(#"not (type:"a" or tag:"b")"#) == .not(.or(a, b)))
        #expect(try F.parse(#"  type:"a"AND tag:"b"  "#) == .and(a, b))
        #expect(try F.parse(#"NOT NOT type:"a""#) == .not(.not(a)))
    }

    @Test(
        "the written form parses back to the same tree",
        arguments: [
            #"type:"a" OR tag:"b" AND city:="c""#,
            #"(type:"a" OR tag:"b") AND NOT (city:="c" OR user.x:>=2)"#,
            #"NOT (type:"a" AND tag:"b") OR name:="q\"uote""#,
            "user.n:-2.5 AND user.ok:false",
        ])
    func roundTrip(text: String) throws {
        let filter = try F.parse(text)
        #expect(try F.parse(filter.description) == filter)
    }

    @Test(
        "syntax errors say what was expected and where",
        arguments: [
            (#"type:"cafe" tag:"x""#, 13, "expected AND or OR between clauses"),
            (#"type:cafe"#, 6, "'cafe' is not a value; put text in double quotes"),
            (#"type"#, 5, "expected ':' after the field name type"),
            (#"colour:"red""#, 1, "unknown field 'colour'"),
            (#"type:"cafe"#, 6, "is never closed"),
            (#"(type:"a" OR tag:"b""#, 21, "'(' at position 1 is never closed"),
            (#"type:"a")"#, 9, "unbalanced ')'"),
            (#"type:"a" AND"#, 13, "expected a clause"),
            (#"type:>"a""#, 6, "type takes no comparison operator"),
            (#"user.rating:>"#, 14, "expected a value"),
            (#"user.open:>true"#, 11, "cannot compare with true or false"),
            (#"city:3"#, 6, "city needs a quoted string value"),
            (#"AND type:"a""#, 1, "found the keyword AND"),
            ("", 1, "query is empty"),
            (#"last_updated:>"2024""#, 1, "not supported by the local index"),
            (#"user.:"x""#, 1, "unknown field 'user.'"),
            (#"name:"a\b""#, 8, #"only \" and \\ may be escaped"#),
        ])
    func errors(text: String, position: Int, message: String) {
        do {
            _ = try F.parse(text)
            Issue.record("'\(text)' parsed")
        } catch {
            #expect(error.position == position, "\(text): \(error.description)")
            #expect(error.message.contains(message), "\(text): \(error.description)")
        }
    }

    @Test("deep nesting and very long queries are refused, not recursed into")
    func limits() {
        let deep = String(repeating: "(", count: 100) + #"type:"a""# + String(repeating: ")", count: 100)
        #expect(throws: PlaceFilterSyntaxError.self) { try F.parse(deep) }
        let long = Array(repeating: #"type:"a""#, count: 400).joined(separator: " OR ")
        #expect(throws: PlaceFilterSyntaxError(position: 2_001, message: "query is longer than 2000 characters")) {
            try F.parse(long)
        }
        let deepNot = String(repeating: "NOT ", count: 33) + #"type:"a""#
        #expect(throws: PlaceFilterSyntaxError.self) { try F.parse(deepNot) }
        #expect((try? F.parse(String(repeating: "NOT ", count: 31) + #"type:"a""#)) != nil)
    }

    @Test("clauses test the store the way Woosmap does")
    func evaluation() throws {
        let poi = POI(
            storeId: "s1", name: "Le Zinc", coordinate: Coordinate(latitude: 0, longitude: 0),
            address: POI.Address(countryCode: "FR", city: "Paris"), types: ["cafe", "bar"], tags: ["wifi"],
            userProperties: .object([
                "rating": .int(4), "score": .double(2.5), "open": .bool(true),
                "since": .string("2019-05-01"), "langs": .array([.string("fr"), .string("en")]),
                "owner": .object(["kind": .string("chain")]),
            ]))
        func check(_ text: String) throws -> Bool { try F.parse(text).matches(poi) }
        #expect(try check(#"type:"bar""#))
        #expect(try !check(#"type:"Bar""#))
        #expect(try check(#"tag:"wifi" AND city:="Paris" AND country:"FR" AND name:"Le Zinc" AND idstore:"s1""#))
        #expect(try !check(#"city:"paris""#))
        #expect(
            try check("user.rating:4 AND user.rating:4.0 AND user.rating:>3 AND user.rating:>=4 AND user.rating:<=4"))
        #expect(try !check("user.rating:>4"))
        #expect(try !check("user.rating:<4"))
        #expect(try check("user.score:<3 AND user.score:>2"))
        #expect(try check("user.open:true"))
        #expect(try !check("user.open:false"))
        #expect(try check(#"user.since:>="2019-01-01" AND user.since:<"2020""#))
        #expect(try check(#"user.langs:"en""#))
        #expect(try check(#"user.owner.kind:"chain""#))
        #expect(try !check(#"user.rating:"4""#), "a string never equals a number")
        #expect(try !check("user.missing:1"))
        #expect(try check("NOT user.missing:1"))
        #expect(try check(#"type:"shop" OR tag:"wifi""#))
        #expect(try !check(#"NOT (type:"shop" OR tag:"wifi")"#))
    }
}
