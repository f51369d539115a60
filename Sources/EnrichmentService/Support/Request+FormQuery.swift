import Foundation
import Hummingbird

extension Request {
    /// Query parameters as browsers, curl `--data-urlencode` and the Woosmap JS SDK send them
    /// (`application/x-www-form-urlencoded`): `+` is a space, `%2B` a plus. The first occurrence of a name wins.
    func formQuery() throws -> [String: String] { try Self.form(uri.query ?? "") }

    /// `name=value&…` pairs (a query string or an `application/x-www-form-urlencoded` body).
    static func form(_ text: String) throws -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ raw: Substring) throws -> String {
                guard let text = raw.replacingOccurrences(of: "+", with: " ").removingPercentEncoding else {
                    throw APIError.invalid(
                        .invalidQuery, "query parameter '\(parts[0])' is not valid percent-encoding")
                }
                return text
            }
            let name = try decode(parts[0])
            if parameters[name] == nil { parameters[name] = try parts.count > 1 ? decode(parts[1]) : "" }
        }
        return parameters
    }
}
