import APNsCore
public import Essentials
public import Foundation

/// An APNs payload (the whole JSON document), with the reads and writes the extension flow needs.
public struct NotificationPayload: Sendable, Equatable {
    /// APNs' limit for a regular remote notification payload, in bytes: the alert push's, as APNsCore writes it.
    public static let maximumSize = PushType.alert.maximumPayloadSize

    /// The full payload document; always a JSON object.
    public private(set) var json: JSONValue {
        didSet {
            measuredSize = nil
            stencil = nil
        }
    }

    /// `encodedSize` when `measured()` made this copy and nothing changed since.
    private var measuredSize: Int?

    /// The document written once around the body and the map URL, when `stenciled()` made this copy and nothing
    /// changed since.
    private(set) var stencil: PayloadStencil?

    /// Equal when the documents are (whether a size was measured does not count).
    public static func == (lhs: NotificationPayload, rhs: NotificationPayload) -> Bool { lhs.json == rhs.json }

    /// Wraps a payload document; it must be a JSON object whose `aps` (when present) is an object.
    public init(json: JSONValue) throws(PayloadError) {
        guard case .object(let root) = json else {
            throw .notAnObject(found: json.typeName)
        }
        if let aps = root["aps"], aps.objectValue == nil {
            throw .apsNotAnObject(found: aps.typeName)
        }
        self.json = json
    }

    /// Parses a payload from JSON bytes.
    public init(data: Data) throws(PayloadError) {
        let value: JSONValue
        do { value = try JSONValue.decode(data) } catch { throw .invalidJSON(error.description) }
        try self.init(json: value)
    }

    var aps: [String: JSONValue] { json["aps"]?.objectValue ?? [:] }

    /// `aps.category`, when it is a string.
    public var category: String? { aps["category"]?.stringValue }

    /// True when `aps.mutable-content` is 1, the flag that makes iOS run a service extension.
    public var isMutable: Bool {
        switch aps["mutable-content"] {
        case .int(1), .bool(true): true
        default: false
        }
    }

    /// The visible alert: `aps.alert` as a dictionary or as a plain body string.
    public var alert: Alert {
        switch aps["alert"] {
        case .string(let body): Alert(title: nil, subtitle: nil, body: body)
        case .object(let object):
            Alert(
                title: object["title"]?.stringValue, subtitle: object["subtitle"]?.stringValue,
                body: object["body"]?.stringValue)
        default: Alert(title: nil, subtitle: nil, body: nil)
        }
    }

    /// True when the push would show something (an alert with a title, subtitle or body).
    public var hasVisibleAlert: Bool {
        let alert = self.alert
        return alert.title != nil || alert.subtitle != nil || alert.body != nil
    }

    /// Reads the timestamp as the given mode does.
    ///
    /// `woosmap` reads only `aps.timestamp` as a JSON integer. `default` also accepts a fractional number
    /// (floored), a numeric string, and the legacy top-level `timestamp`.
    public func readTimestamp(mode: BodyMode) -> TimestampReading {
        let value = aps["timestamp"]
        switch (mode, value) {
        case (_, .int(let seconds)):
            return TimestampReading(timestamp: seconds, source: .apsInteger, problem: nil)
        case (.woosmap, nil):
            return TimestampReading(timestamp: nil, source: nil, problem: "aps.timestamp is missing")
        case (.woosmap, .some(let other)):
            return TimestampReading(
                timestamp: nil, source: nil,
                problem: Self.placeholderProblem(other, field: "aps.timestamp")
                    ?? "aps.timestamp is a \(other.typeName == "number" ? "non-integral number" : other.typeName); woosmap mode reads only a JSON integer"
            )
        case (.default, .some(let other)):
            if let seconds = Self.lenientSeconds(other) {
                return TimestampReading(
                    timestamp: seconds, source: other.stringValue != nil ? .apsString : .apsNumber, problem: nil)
            }
            return TimestampReading(
                timestamp: nil, source: nil,
                problem: Self.placeholderProblem(other, field: "aps.timestamp")
                    ?? "aps.timestamp is a \(other.typeName) that is not epoch seconds")
        case (.default, nil):
            if let legacy = json["timestamp"] {
                if let seconds = Self.lenientSeconds(legacy) {
                    return TimestampReading(timestamp: seconds, source: .legacyTopLevel, problem: nil)
                }
                return TimestampReading(
                    timestamp: nil, source: nil,
                    problem: Self.placeholderProblem(legacy, field: "top-level timestamp")
                        ?? "top-level timestamp is a \(legacy.typeName) that is not epoch seconds")
            }
            return TimestampReading(
                timestamp: nil, source: nil, problem: "neither aps.timestamp nor a top-level timestamp is present")
        }
    }

    /// The words for a timestamp left as a template placeholder (`"{{now}}"`, as in `payloads/*.json`), or nil.
    public static func placeholderProblem(_ value: JSONValue, field: String) -> String? {
        guard let text = value.stringValue, text.contains("{{"), text.contains("}}") else { return nil }
        return "\(field) is the unfilled placeholder \(text.count <= 40 ? "\"\(text)\"" : "text") (push-sender "
            + "check, simulate and send fill it in with the current time; a payload posted to the service needs "
            + "epoch seconds, e.g. $(date +%s))"
    }

    private static func lenientSeconds(_ value: JSONValue) -> Int64? {
        guard let double = value.lenientDouble else { return nil }
        let floored = double.rounded(.down)
        guard floored >= -9.0e15, floored <= 9.0e15 else { return nil }
        return Int64(floored)
    }

    /// Whether the push asks for location enrichment, and whether the legacy top-level `location` said so.
    public func locationRequest(mode: BodyMode) -> (wanted: Bool, legacy: Bool) {
        if category == "location" { return (true, false) }
        guard mode == .default, let flag = json["location"] else { return (false, false) }
        switch flag {
        case .string("1"), .int(1), .bool(true): return (true, true)
        default: return (false, false)
        }
    }

    /// A copy with `aps.alert`'s body replaced; title and subtitle are kept, and a string alert stays a string.
    public func replacingBody(_ body: String) -> NotificationPayload {
        var copy = self
        var aps = self.aps
        switch aps["alert"] {
        case .object(var alert):
            alert["body"] = .string(body)
            aps["alert"] = .object(alert)
        default:
            aps["alert"] = .string(body)
        }
        copy.json["aps"] = .object(aps)
        return copy
    }

    /// What enrichment sends: this payload with `body` as the alert's body and, when given, `attachment` as the
    /// top-level `attachment-url` (`Enricher.attachmentKey`).
    func edited(body: String, attachment: String?) -> NotificationPayload {
        let withBody = replacingBody(body)
        return attachment.map { withBody.setting(Enricher.attachmentKey, to: .string($0)) } ?? withBody
    }

    /// A copy with a top-level member set (or removed with nil).
    public func setting(_ key: String, to value: JSONValue?) -> NotificationPayload {
        var copy = self
        copy.json[key] = value
        if value == nil, case .object(var root) = copy.json {
            root.removeValue(forKey: key)
            copy.json = .object(root)
        }
        return copy
    }

    /// The payload as compact JSON bytes (sorted keys).
    public func encoded() -> Data { json.encodedData() }

    /// The size of the compact JSON encoding in bytes (what APNs counts).
    public var encodedSize: Int { measuredSize ?? json.encodedSize }

    /// A copy that knows its `encodedSize` (measured once here): one push's payload is enriched for each of up
    /// to 1,000 devices, and each enrichment checks the size it was given. A change to the copy forgets it.
    public func measured() -> NotificationPayload {
        var copy = self
        copy.measuredSize = json.encodedSize
        return copy
    }

    /// A copy that also holds its document written around the two values enrichment sets per device (the alert's
    /// body, the map's `attachment-url`): each device's payload is then those pieces and its two values, not the
    /// whole document written again (`PayloadStencil`). For one push enriched for many devices.
    public func stenciled() -> NotificationPayload {
        var copy = self
        copy.stencil = PayloadStencil(self)
        return copy
    }
}

/// The visible part of a notification.
public struct Alert: Sendable, Equatable {
    public var title: String?
    public var subtitle: String?
    public var body: String?

    public init(title: String?, subtitle: String?, body: String?) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
    }
}

/// Why a payload could not be read.
public enum PayloadError: Error, Equatable, Sendable {
    case invalidJSON(String)
    case notAnObject(found: String)
    case apsNotAnObject(found: String)
    case tooLarge(bytes: Int, limit: Int)
    case cannotFit(minimumBytes: Int, limit: Int)
}

extension PayloadError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .invalidJSON(let detail): "payload is not valid JSON: \(detail)"
        case .notAnObject(let found): "payload must be a JSON object, found \(found)"
        case .apsNotAnObject(let found): "payload.aps must be a JSON object, found \(found)"
        case .tooLarge(let bytes, let limit): "payload is \(bytes) bytes; APNs allows at most \(limit)"
        case .cannotFit(let bytes, let limit):
            "enriched payload needs at least \(bytes) bytes even with an empty body; APNs allows at most \(limit)"
        }
    }
}
