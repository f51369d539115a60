import Essentials

/// A push's payload written once around the values enrichment sets for each device: the alert's body and, with a
/// map, the top-level `attachment-url` (`Enricher.attachmentKey`). The rest of the document, and so its sorted keys,
/// is the same for every device of the push: a device's payload is the pieces between the holes and its own values,
/// escaped, byte for byte what writing the whole edited document gives (`JSONWriter`, sorted keys).
struct PayloadStencil: Sendable {
    /// What goes in a hole.
    enum Hole: Sendable {
        case body
        case attachment
    }

    /// The document as bytes between holes: `pieces.count == holes.count + 1`, each hole a JSON string whose quotes
    /// are in the pieces.
    struct Shape: Sendable {
        var pieces: [[UInt8]]
        var holes: [Hole]
        /// The pieces' bytes together.
        var fixedSize: Int
    }

    /// The body and the map URL set.
    let withAttachment: Shape
    /// The body set, the document's own `attachment-url` (if any) left as it is: enrichment without a map.
    let withoutAttachment: Shape

    /// Nil when the holes cannot be found once each in the written document (a payload that already holds the
    /// marker text): the caller writes each device's document in full, as without a stencil.
    init?(_ payload: NotificationPayload) {
        // Text no payload holds, but for one made to (then the shape is refused below): a noncharacter, and words.
        let body = "\u{FFFF}enrichment-body-hole\u{FFFF}"
        let attachment = "\u{FFFF}enrichment-attachment-hole\u{FFFF}"
        guard
            let withAttachment = Self.shape(
                payload.edited(body: body, attachment: attachment), body: body, attachment: attachment),
            let withoutAttachment = Self.shape(payload.edited(body: body, attachment: nil), body: body, attachment: nil)
        else { return nil }
        self.withAttachment = withAttachment
        self.withoutAttachment = withoutAttachment
    }

    private static func shape(_ payload: NotificationPayload, body: String, attachment: String?) -> Shape? {
        let bytes = JSONWriter.bytes(payload.json)
        var found: [(range: Range<Int>, hole: Hole)] = []
        for (text, hole) in [(body, Hole.body)] + (attachment.map { [($0, Hole.attachment)] } ?? []) {
            // The value as written: quoted (it has nothing to escape).
            let marker = [UInt8(ascii: "\"")] + Array(text.utf8) + [UInt8(ascii: "\"")]
            let places = occurrences(of: marker, in: bytes)
            guard places.count == 1 else { return nil }
            found.append((places[0]..<places[0] + marker.count, hole))
        }
        found.sort { $0.range.lowerBound < $1.range.lowerBound }
        var pieces: [[UInt8]] = []
        var start = 0
        for (range, _) in found {
            // The quotes stay with the pieces; the hole is the string's contents.
            pieces.append(Array(bytes[start...range.lowerBound]))
            start = range.upperBound - 1
        }
        pieces.append(Array(bytes[start...]))
        return Shape(pieces: pieces, holes: found.map(\.hole), fixedSize: pieces.reduce(0) { $0 + $1.count })
    }

    private static func occurrences(of marker: [UInt8], in bytes: [UInt8]) -> [Int] {
        guard marker.count <= bytes.count else { return [] }
        var places: [Int] = []
        for start in 0...(bytes.count - marker.count) where bytes[start] == marker[0] {
            if bytes[start..<start + marker.count].elementsEqual(marker) { places.append(start) }
        }
        return places
    }

    /// The device's payload with `body` and (when given) `attachment`; nil when it would be over `limit` bytes
    /// (the caller shortens the body as without a stencil).
    func render(body: String, attachment: String?, limit: Int) -> [UInt8]? {
        let shape = attachment == nil ? withoutAttachment : withAttachment
        var size = shape.fixedSize
        for hole in shape.holes {
            switch hole {
            case .body: size += JSONWriter.escapedLength(body)
            case .attachment: size += JSONWriter.escapedLength(attachment ?? "")
            }
        }
        guard size <= limit else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(size)
        for (index, hole) in shape.holes.enumerated() {
            output.append(contentsOf: shape.pieces[index])
            switch hole {
            case .body: JSONWriter.writeEscaped(body, into: &output)
            case .attachment: JSONWriter.writeEscaped(attachment ?? "", into: &output)
            }
        }
        output.append(contentsOf: shape.pieces[shape.holes.count])
        return output
    }
}
