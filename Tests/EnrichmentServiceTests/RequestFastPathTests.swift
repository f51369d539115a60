import Testing

@testable import EnrichmentService

/// The byte-level readings that run on every request: the Content-Type's media type and the path the router and
/// the key check compare.
@Suite("Per-request readings (media type, path)")
struct RequestFastPathTests {
    @Test(
        "JSON media types are told from others as RFC 9110 reads them: case-insensitive, blanks and parameters aside",
        arguments: [
            ("application/json", true), ("APPLICATION/JSON", true), ("Application/Json; charset=utf-8", true),
            (" application/json ;charset=utf-8", true), ("\tapplication/json\t", true),
            ("application/merge-patch+json", true), ("application/vnd.api+JSON", true),
            ("application/jsonx", false), ("application/json5", false), ("text/json", false), ("text/plain", false),
            ("application/+json", false), ("application/", false), ("application/x-www-form-urlencoded", false),
            ("json", false), ("", false), ("application/ json", false),
        ])
    func mediaTypes(declared: String, accepted: Bool) {
        #expect(JSONIO.isJSONMediaType(declared) == accepted)
    }

    @Test(
        "a path is normalized as the router matches it, and one already normal is kept as it is",
        arguments: [
            ("/health", "/health"), ("/health/", "/health"), ("//health", "/health"), ("/v1//enrich", "/v1/enrich"),
            ("/", "/"), ("", "/"), ("health", "/health"), ("/v1/devices/a%2Fb", "/v1/devices/a%2Fb"),
            ("///", "/"),
        ])
    func paths(path: String, normalized: String) {
        #expect(RouteTable.normalized(path) == normalized)
        #expect(RouteTable.normalized(path) == "/" + RouteTable.segments(path).joined(separator: "/"))
    }
}
