public import Essentials
public import Foundation

/// POIs read from one import file, and the rows that could not be read.
///
/// Memory stays bounded by the POIs themselves: skipped rows are counted by reason and only the first
/// `POIImportReport.listedProblems` are kept, and a file may hold at most `maximumRows` rows.
public struct POIBatch: Sendable, Equatable {
    /// Most rows (CSV records or GeoJSON features) one import may hold; larger files must be split.
    public static let maximumRows = 2_000_000

    public var pois: [POI] = []
    /// The first skipped rows, in file order.
    public private(set) var rejected: [WoosmapFormat.FeatureProblem] = []
    /// Every skipped row, counted.
    public private(set) var rejectedCount = 0
    /// Skipped rows by reason.
    public private(set) var rejectedByReason: [String: Int] = [:]
    /// Rows this batch may hold (`maximumRows` unless a caller lowers it).
    var rowLimit = POIBatch.maximumRows
    /// A streamed read (`POIBatch.stream`): the POIs handed on so far (not kept in `pois`), and how many of them
    /// repeat a store id seen before (told apart by a 64-bit hash of the id: 16 bytes per row, not the POI).
    public private(set) var streamedRows = 0
    public private(set) var streamedRepeats = 0
    private var streamedIds: Set<Int> = []
    /// Where a streamed read hands its POIs, a chunk at a time.
    private var sink: Sink?
    struct Sink: Equatable {
        let chunk: Int
        let emit: @Sendable ([POI]) throws -> Void
        static func == (lhs: Sink, rhs: Sink) -> Bool { lhs.chunk == rhs.chunk }
    }

    public init(pois: [POI] = [], rejected: [WoosmapFormat.FeatureProblem] = []) {
        self.pois = pois
        for problem in rejected { reject(problem) }
    }

    /// Records a skipped row.
    public mutating func reject(_ problem: WoosmapFormat.FeatureProblem) {
        rejectedCount += 1
        rejectedByReason[problem.reason, default: 0] += 1
        if rejected.count < POIImportReport.listedProblems { rejected.append(problem) }
    }

    /// Rows seen so far (kept, handed on and skipped).
    public var rows: Int { pois.count + streamedRows + rejectedCount }

    /// Keeps a POI read from the file, or hands the chunk on once it is full (a streamed read).
    mutating func add(_ poi: POI) throws {
        pois.append(poi)
        guard let sink else { return }
        if !streamedIds.insert(poi.storeId.hashValue).inserted { streamedRepeats += 1 }
        if pois.count >= sink.chunk { try flush() }
    }

    /// Hands on what a streamed read holds.
    mutating func flush() throws {
        guard let sink, !pois.isEmpty else { return }
        try sink.emit(pois)
        streamedRows += pois.count
        pois.removeAll(keepingCapacity: true)
    }

    /// Reads the file at `path` a piece at a time and hands its POIs to `emit` in chunks of `chunk`, so that memory
    /// holds one chunk and not the file's POIs (`import-pois`). CSV is read 1 MiB at a time; GeoJSON is mapped
    /// (its pages are the file's, which the kernel drops as it needs) and parsed one feature at a time. Returns the
    /// counts (the POIs themselves went to `emit`). An error of `emit` stops the read and is thrown as it is.
    public static func stream(
        path: String, format: Format, chunk: Int = 5_000, rowLimit: Int = maximumRows,
        emit: @escaping @Sendable ([POI]) throws -> Void
    ) throws -> POIBatch {
        var batch = POIBatch()
        batch.rowLimit = rowLimit
        batch.sink = Sink(chunk: max(1, chunk), emit: emit)
        switch format {
        case .csv(let mapping):
            guard let file = FileHandle(forReadingAtPath: path) else {
                throw POIImportError.csv(line: 0, reason: "cannot read '\(path)': check the path and permissions")
            }
            defer { try? file.close() }
            var reader = try CSVRecordReader { try file.read(upToCount: 1 << 20).map { [UInt8]($0) } }
            try POICSV.read(&reader, mapping: mapping, into: &batch)
        case .geoJSON:
            let data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
            try WoosmapFormat.readFeatureCollection(data, into: &batch)
        }
        try batch.flush()
        return batch
    }

    /// The format of an import file.
    public enum Format: Sendable, Equatable {
        case csv(POIColumnMapping?)
        case geoJSON
    }

    /// Reads a whole file in `format`; rows that cannot be read are reported, not fatal.
    ///
    /// GeoJSON features are read one at a time (the document is never held as a tree).
    public static func read(_ data: Data, format: Format, rowLimit: Int = maximumRows) throws(POIImportError)
        -> POIBatch
    {
        switch format {
        case .csv(let mapping):
            return try POICSV.parse(data, mapping: mapping, rowLimit: rowLimit)
        case .geoJSON:
            return try WoosmapFormat.readFeatureCollection(data, rowLimit: rowLimit)
        }
    }

    /// Refuses the file once it has more rows than an import may hold.
    mutating func checkRowLimit(line: Int) throws(POIImportError) {
        if rows >= rowLimit {
            throw .tooManyRows(limit: rowLimit, at: line)
        }
    }

    /// Rows whose store id an earlier row of the same file already used (the later row wins).
    public var repeatedStoreIds: Int {
        if sink != nil { return streamedRepeats }
        var seen = Set<String>(minimumCapacity: pois.count)
        return pois.reduce(0) { $0 + (seen.insert($1.storeId).inserted ? 0 : 1) }
    }

    /// What an import did, for people and scripts alike.
    public func report(total: Int, seconds: Double, format: Format) -> POIImportReport {
        POIImportReport(
            upserted: pois.count + streamedRows, total: total, rejectedCount: rejectedCount,
            rejectedByReason: rejectedByReason,
            rejected: rejected,
            repeatedStoreIds: repeatedStoreIds, seconds: seconds,
            indexKind: format == .geoJSON ? "feature" : "line")
    }
}

/// The outcome of an import: rows written, rows skipped grouped by reason (with the first few listed).
public struct POIImportReport: Sendable, Equatable, JSONObjectRepresentable {
    /// Skipped rows listed one by one; the rest are only counted by reason.
    public static let listedProblems = 100

    public var upserted: Int
    /// POIs stored after the import.
    public var total: Int
    public var rejectedCount: Int
    public var rejectedByReason: [String: Int]
    public var rejected: [WoosmapFormat.FeatureProblem]
    public var repeatedStoreIds: Int
    public var seconds: Double
    /// What `rejected[].index` counts: `line` (CSV) or `feature` (GeoJSON).
    public var indexKind = "line"

    public func writeJSON(into object: inout JSONObjectWriter) {
        object.field("rejected", objects: rejected)
        object.field("rejected_by_reason", counts: rejectedByReason)
        object.field("rejected_count", rejectedCount)
        object.field("repeated_store_ids", repeatedStoreIds)
        object.field("seconds", seconds)
        object.field("total", total)
        object.field("upserted", upserted)
    }

    /// Lines for a terminal: the totals, then each skip reason with its count and first example.
    public var humanLines: [String] {
        var lines = [
            "Upserted \(upserted) POIs in \(String(format: "%.2f", seconds)) s; \(total) stored; \(rejectedCount) rows skipped."
        ]
        if repeatedStoreIds > 0 {
            lines.append(
                "  \(repeatedStoreIds) rows repeat a store id used earlier in the file; the last one was kept.")
        }
        for (reason, count) in rejectedByReason.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
            let example = rejected.first { $0.reason == reason }
            let at = example.map { " (first at \(indexKind) \($0.index)\($0.value.map { ": '\($0)'" } ?? ""))" } ?? ""
            lines.append("  skipped \(count): \(reason)\(at)")
        }
        return lines
    }
}
