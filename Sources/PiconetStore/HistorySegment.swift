import PiconetSensors
import PiconetWire

/// The batches of one node that arrived within one second, as one history row.
///
/// Why segments: with a row per batch (and an entry per batch in each of two indexes), SQLite's
/// b-tree inserts were most of the hub's ingest cost; a C program doing nothing but those
/// inserts through a prepared statement was barely faster than python3's `executemany`.
/// A wearable sends about ten batches a second, and the hub writes once a second,
/// so a node's batches of one flush share one row: about a tenth of the rows, index entries and
/// page writes (which also spares a Pi's SD card). Reads unpack a segment and see the batches
/// exactly as a row per batch gave them (same order, same range and limit semantics).
///
/// A segment spans less than `span` of arrival time and its arrival times never go backwards, so
/// a time range query finds every batch it wants among segments that *start* at most one span
/// before the range.
///
/// `payload`, little-endian like every Piconet format, one entry per batch in arrival order:
///
///     u32  arrival time - the segment's first arrival, ns (< span)
///     u32  length of the batch's encoding
///     ...  the `SampleBatch` encoding (the compact wire format, parsed by the same checked code)
struct HistorySegment: Equatable {
    /// Arrival times in one segment lie within this much of its first one (1 s, in ns).
    static let span: Int64 = 1_000_000_000
    /// Bytes of framing per batch.
    static let entryHeaderLength = 8

    var node: String
    /// Wall-clock arrival of its first and last batch, ns since the Unix epoch.
    var first: Int64
    var last: Int64
    var count: Int
    var payload: [UInt8]

    /// One batch's bytes as a segment of its own (the migration from a row per batch moves each
    /// stored payload as it is, parseable or not, so a damaged row stays visible as skipped).
    init(node: String, receivedAt: Int64, encodedBatch: [UInt8]) {
        self.node = node
        first = receivedAt
        last = receivedAt
        count = 1
        var w = ByteWriter(capacity: Self.entryHeaderLength + encodedBatch.count)
        w.writeUInt32(0)
        w.writeUInt32(UInt32(truncatingIfNeeded: encodedBatch.count))
        w.writeBytes(encodedBatch)
        payload = w.takeBytes()
    }

    init(node: String, first: Int64, last: Int64, count: Int, payload: [UInt8]) {
        self.node = node
        self.first = first
        self.last = last
        self.count = count
        self.payload = payload
    }

    /// Whether `receivedAt` may join this segment: not earlier than its last arrival and
    /// within `span` of its first.
    func accepts(_ receivedAt: Int64) -> Bool {
        receivedAt >= last && receivedAt &- first < Self.span   // last >= first, so never before first
    }

    /// Appends one batch (the caller checked `accepts`).
    mutating func append(_ batch: SampleBatch, receivedAt: Int64) {
        let length = batch.encodedLength
        var w = ByteWriter(appendingTo: &payload, reserving: Self.entryHeaderLength + length)   // no copy between
        w.writeUInt32(UInt32(truncatingIfNeeded: receivedAt &- first))
        w.writeUInt32(UInt32(truncatingIfNeeded: length))
        batch.encode(into: &w)
        payload = w.takeBytes()
        last = receivedAt
        count += 1
    }

    /// The segments of `batches` (any nodes, in arrival order): per node, a new segment starts
    /// when a second has passed since the open one's first arrival or arrival time goes
    /// backwards. Segments come out in the order they were started, so row ids follow arrival.
    static func segments(of batches: [StoredBatch]) -> [HistorySegment] {
        var out: [HistorySegment] = []
        var open: [String: Int] = [:]   // node -> index in `out` of its open segment
        for b in batches {
            if let i = open[b.node], out[i].accepts(b.receivedAt) {
                out[i].append(b.batch, receivedAt: b.receivedAt)
                continue
            }
            var s = HistorySegment(node: b.node, first: b.receivedAt, last: b.receivedAt, count: 0, payload: [])
            s.append(b.batch, receivedAt: b.receivedAt)
            open[b.node] = out.count
            out.append(s)
        }
        return out
    }

    /// One entry as read back: its arrival time and the batch, or nil when its bytes no longer
    /// parse (a damaged page), with the framing intact around it.
    struct Entry {
        var receivedAt: Int64
        var batch: SampleBatch?
    }

    /// The entries of a stored payload whose first arrival is `first`. A batch that does not parse
    /// is an entry with no batch; framing that runs past the end (a truncated or damaged blob)
    /// ends the walk, and the entries it can no longer find are `lost` (of `declaredCount`).
    static func entries(payload: [UInt8], first: Int64, declaredCount: Int) -> (entries: [Entry], lost: Int) {
        var r = ByteReader(payload)
        var out: [Entry] = []
        out.reserveCapacity(max(0, min(declaredCount, payload.count / (entryHeaderLength + SampleBatch.headerLength))))
        while !r.isAtEnd {
            guard let offset = try? r.readUInt32(), let length = try? r.readUInt32(),
                  Int64(offset) < span, let bytes = try? r.readBytes(Int(length)) else {
                return (out, max(1, declaredCount - out.count))
            }
            out.append(Entry(receivedAt: first &+ Int64(offset), batch: try? SampleBatch(decoding: bytes)))
        }
        return (out, max(0, declaredCount - out.count))
    }
}
