import APNsCore
import EnrichmentCore
import Essentials

/// The members of a JSON object in a request body, read the one way every route reads them: an unknown member is
/// refused (`unknown_field`: a misspelt rule silently ignored would act on the wrong one), `null` is the same as
/// absent, and a member of the wrong type is refused naming the member, the type expected and the type found.
struct BodyMembers {
    let fields: [String: JSONValue]
    /// The path of this object in the body (`fix.` for the members of `fix`), for messages and `error.field`.
    let path: String

    /// The members of `document`, which must be an object with no member outside `allowed`; `shape` describes the
    /// object expected, for the message when it is not one.
    init(_ document: JSONValue, allowed: [String], shape: String, path: String = "") throws {
        guard case .object(let fields) = document else {
            let name = path.isEmpty ? "body" : String(path.dropLast())
            throw APIError.invalid(
                .invalidRequest, "\(name) must be a JSON object \(shape), found \(document.typeName)",
                field: path.isEmpty ? nil : name)
        }
        if let unknown = fields.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw APIError.invalid(
                .unknownField,
                "'\(path)\(unknown)' is not a member of this \(path.isEmpty ? "request" : "object"); allowed: \(allowed.joined(separator: ", "))",
                field: path + unknown)
        }
        self.fields = fields
        self.path = path
    }

    /// The member's value; nil when it is absent or `null`.
    func value(_ name: String) -> JSONValue? {
        guard let value = fields[name], value != .null else { return nil }
        return value
    }

    /// True when the member is present, even as `null`.
    func contains(_ name: String) -> Bool { fields[name] != nil }

    /// The member's value, or a 400 saying it is required (and what it is, when `what` is given).
    func required(_ name: String, _ what: String? = nil) throws -> JSONValue {
        guard let value = value(name) else {
            throw APIError.invalid(
                .invalidRequest, "\(path)\(name) is required" + (what.map { " (\($0))" } ?? ""), field: path + name)
        }
        return value
    }

    /// A 400 for this member, with `reason` (`invalid_request` unless said).
    func invalid(_ name: String, _ problem: String, reason: APIReason = .invalidRequest) -> APIError {
        APIError.invalid(reason, "\(path)\(name) \(problem)", field: path + name)
    }

    func string(_ name: String) throws -> String? {
        guard let value = value(name) else { return nil }
        guard let text = value.stringValue else { throw invalid(name, "must be a string, found \(value.typeName)") }
        return text
    }

    func requiredString(_ name: String, _ what: String? = nil) throws -> String {
        let value = try required(name, what)
        guard let text = value.stringValue else {
            throw invalid(name, "must be a string" + (what.map { " (\($0))" } ?? "") + ", found \(value.typeName)")
        }
        return text
    }

    func integer(_ name: String) throws -> Int64? {
        guard let value = value(name) else { return nil }
        guard case .int(let number) = value else {
            throw invalid(name, "must be an integer, found \(value.typeName)")
        }
        return number
    }

    /// A finite number (an integer or a decimal, not a string) within `range` when one is given.
    func number(_ name: String, in range: ClosedRange<Double>? = nil) throws -> Double? {
        guard let value = value(name) else { return nil }
        guard let number = value.lenientDouble, value.stringValue == nil, number.isFinite,
            range.map({ $0.contains(number) }) ?? true
        else {
            throw invalid(name, "must be a number\(range.map { " in [\($0.lowerBound), \($0.upperBound)]" } ?? "")")
        }
        return number
    }

    func bool(_ name: String) throws -> Bool? {
        guard let value = value(name) else { return nil }
        guard case .bool(let flag) = value else {
            throw invalid(name, "must be true or false, found \(value.typeName)")
        }
        return flag
    }

    /// A string member that must name one of `T`'s cases.
    func choice<T: RawRepresentable & CaseIterable>(_ name: String, _ type: T.Type) throws -> T?
    where T.RawValue == String {
        guard let raw = try string(name) else { return nil }
        guard let chosen = T(rawValue: raw) else {
            let shown = raw.utf8.count <= 32 ? "'\(raw)'" : "(\(raw.utf8.count) bytes)"
            throw invalid(name, "\(shown) is unknown; use one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return chosen
    }

    /// An APNs environment member: `sandbox` or `production` (`fcm` is not one: an FCM token has its own route).
    func apnsEnvironment(_ name: String) throws -> APNsEnvironmentName? {
        guard let raw = try string(name) else { return nil }
        guard let chosen = APNsEnvironmentName(rawValue: raw), chosen.isAPNs else {
            let shown = raw.utf8.count <= 32 ? "'\(raw)'" : "(\(raw.utf8.count) bytes)"
            let fcm =
                raw == APNsEnvironmentName.fcm.rawValue
                ? " (an FCM registration token is registered at /v1/devices/{device_id}/fcm-tokens/{token})" : ""
            throw invalid(name, "\(shown) is unknown; use one of sandbox, production\(fcm)")
        }
        return chosen
    }

    /// The members of a nested object member, read the same way; nil when absent or `null`.
    func object(_ name: String, allowed: [String], shape: String) throws -> BodyMembers? {
        guard let value = value(name) else { return nil }
        return try BodyMembers(value, allowed: allowed, shape: shape, path: "\(path)\(name).")
    }
}
