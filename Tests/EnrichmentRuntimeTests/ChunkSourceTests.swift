import EnrichmentRuntime
import Testing

/// The resolve stage's chunks (issue 48): after the cursor, within the push's room, each device once, from a list
/// or paged from the store (everyone), without a socket or a database.
@Suite("Audience chunks: cursor, room, everyone paged")
struct ChunkSourceTests {
    /// A store of `ids` (kept sorted) read a page at a time, counting the pages.
    final class Pages: @unchecked Sendable {
        let ids: [String]
        var reads = 0
        init(_ ids: [String]) { self.ids = ids.sorted() }
        func page(after: String?, limit: Int) -> [String] {
            reads += 1
            return Array(ids.filter { after == nil || $0 > after! }.prefix(limit))
        }
    }

    /// `<prefix>NN`: two digits, so the ids sort as their numbers.
    static func id(_ prefix: String, _ number: Int) -> String {
        number < 10 ? "\(prefix)0\(number)" : "\(prefix)\(number)"
    }

    static func drain(_ source: inout ChunkSource, size: Int, pages: Pages) async throws -> [[String]] {
        var chunks: [[String]] = []
        while true {
            let (chunk, _, last) = try await source.next(size, page: { pages.page(after: $0, limit: $1) })
            chunks.append(chunk)
            if last { return chunks }
            #expect(chunks.count < 1_000, "ends")
        }
    }

    @Test("a list is cut in chunks after the cursor, each device once")
    func listed() async throws {
        let ids = (0..<25).map { Self.id("d", $0) }
        var source = ChunkSource(list: .listed(ids), through: "d04", room: 100)
        let chunks = try await Self.drain(&source, size: 10, pages: Pages([]))
        #expect(chunks.map(\.count) == [10, 10])
        #expect(chunks.joined().first == "d05")
        #expect(Array(chunks.joined()) == Array(ids[5...]))
        #expect(!source.truncated)
    }

    @Test("everyone is paged from the store, less the devices taken away; the cursor passes them too")
    func everyone() async throws {
        let ids = (0..<23).map { Self.id("e", $0) }
        let pages = Pages(ids)
        var source = ChunkSource(list: .everyone(except: ["e03", "e10", "e22"]), through: nil, room: 100)
        var throughs: [String?] = []
        var all: [String] = []
        while true {
            let (chunk, through, last) = try await source.next(10, page: { pages.page(after: $0, limit: $1) })
            all += chunk
            throughs.append(through)
            if last { break }
        }
        #expect(all == ids.filter { !["e03", "e10", "e22"].contains($0) })
        #expect(throughs == ["e09", "e19", "e22", "e22"], "a page's last id, taken away or not; an empty page ends")
        #expect(pages.reads == 4)
        // After a restart at the cursor e09: from e11 on (e10 is taken away).
        var resumed = ChunkSource(list: .everyone(except: ["e10"]), through: "e09", room: 100)
        let rest = try await Self.drain(&resumed, size: 50, pages: Pages(ids))
        #expect(rest.joined().first == "e11")
        #expect(rest.joined().count == 12)
    }

    @Test("the room left (ENRICH_MAX_PUSH_AUDIENCE) cuts the audience at its first devices, and says so")
    func room() async throws {
        let ids = (0..<30).map { Self.id("r", $0) }
        var listed = ChunkSource(list: .listed(ids), through: nil, room: 12)
        let chunks = try await Self.drain(&listed, size: 5, pages: Pages([]))
        #expect(Array(chunks.joined()) == Array(ids.prefix(12)))
        #expect(listed.truncated)
        var paged = ChunkSource(list: .everyone(except: ["r01"]), through: nil, room: 12)
        let fromStore = try await Self.drain(&paged, size: 5, pages: Pages(ids))
        #expect(Array(fromStore.joined()) == Array(ids.filter { $0 != "r01" }.prefix(12)))
        #expect(paged.truncated)
        // Exactly the room: not cut.
        var exact = ChunkSource(list: .listed(Array(ids.prefix(12))), through: nil, room: 12)
        _ = try await Self.drain(&exact, size: 5, pages: Pages([]))
        #expect(!exact.truncated)
    }
}
