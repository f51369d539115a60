import Foundation

/// An audience's devices a chunk at a time, after the push's cursor and within the room the push has left: from a
/// list in memory, or paged from the token store (everyone), each device once.
public struct ChunkSource: Sendable {
    private var listed: [String]
    private var offset = 0
    private let except: Set<String>?
    private var cursor: String?
    private var room: Int
    private var exhausted = false
    /// True once the room ran out before the audience did (said once).
    public private(set) var truncated = false

    public init(list: AudienceMemberList, through: String?, room: Int) {
        self.room = room
        cursor = through
        switch list {
        case .listed(let ids):
            listed = ids
            except = nil
            // Devices up to the cursor were enqueued before a restart: each device gets its deliveries once.
            if let through { offset = ids.partitionPoint { $0 <= through } }
        case .everyone(let removed):
            listed = []
            except = removed
        }
    }

    /// The next chunk of up to `size` devices, the cursor after it, and whether it is the last.
    public mutating func next(
        _ size: Int, page: (_ after: String?, _ limit: Int) async throws -> [String]
    ) async throws -> (devices: [String], through: String?, last: Bool) {
        let size = max(1, size)
        truncated = false
        guard let except else {
            let end = min(listed.count, offset + min(size, room))
            let chunk = Array(listed[offset..<end])
            offset = end
            room -= chunk.count
            if room == 0, offset < listed.count { truncated = true }
            let last = offset == listed.count || room == 0
            if last { listed = [] }
            return (chunk, chunk.last ?? cursor, last)
        }
        // Paged from the store: the cursor moves past the devices taken away too.
        let read = try await page(cursor, size)
        var chunk: [String] = []
        chunk.reserveCapacity(read.count)
        var through = cursor
        for id in read {
            if chunk.count == room {
                truncated = true
                break
            }
            through = id
            if !except.contains(id) { chunk.append(id) }
        }
        room -= chunk.count
        cursor = through
        // Only an empty page ends it: a page holds fewer devices than rows when a device has two registrations.
        let last = truncated || read.isEmpty
        return (chunk, through, last)
    }
}

extension Array where Element: Comparable {
    /// The index of the first element for which `belongs` is false (the array is partitioned by it).
    fileprivate func partitionPoint(_ belongs: (Element) -> Bool) -> Int {
        var (low, high) = (0, count)
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
