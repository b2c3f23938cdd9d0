import Foundation
import GRDB
import PiconetLoop
import PiconetSensors
@testable import PiconetStore
import PiconetWire
import Testing

/// The history's row per node-second (`HistorySegment`): how batches are grouped, the
/// payload's bytes, and that reading back gives exactly what a row per batch gave.
@Suite struct HistorySegmentTests {
    static let t0: Int64 = 1_700_000_000_000_000_000

    static func emptyBatch(_ sequence: UInt32) -> SampleBatch {
        SampleBatch(sequence: sequence, epoch: 3, sentAt: Instant(nanoseconds: 0x0102), samples: [])
    }

    @Test func aSegmentsPayloadHasItsGoldenBytes() {
        var s = HistorySegment(node: "n", first: Self.t0, last: Self.t0, count: 0, payload: [])
        s.append(Self.emptyBatch(1), receivedAt: Self.t0)
        s.append(Self.emptyBatch(2), receivedAt: Self.t0 + 0x01_0203)
        let batch1 = Self.emptyBatch(1).encoded(), batch2 = Self.emptyBatch(2).encoded()
        #expect(batch1.count == SampleBatch.headerLength)
        let golden: [UInt8] = [0, 0, 0, 0, 23, 0, 0, 0] + batch1 + [0x03, 0x02, 0x01, 0, 23, 0, 0, 0] + batch2
        #expect(s.payload == golden)
        #expect(s.count == 2 && s.first == Self.t0 && s.last == Self.t0 + 0x01_0203)
        let (entries, lost) = HistorySegment.entries(payload: golden, first: Self.t0, declaredCount: 2)
        #expect(lost == 0)
        #expect(entries.map(\.receivedAt) == [Self.t0, Self.t0 + 0x01_0203])
        #expect(entries.map { $0.batch?.sequence } == [1, 2])
        // The one-batch segment a v1 row becomes: the same framing around the stored bytes.
        #expect(HistorySegment(node: "n", receivedAt: Self.t0, encodedBatch: batch1).payload == Array(golden.prefix(8 + 23)))
    }

    @Test func everyCutPayloadLosesOnlyWhatItCannotFrame() {
        var s = HistorySegment(node: "n", first: Self.t0, last: Self.t0, count: 0, payload: [])
        for i in 0..<3 { s.append(Self.emptyBatch(UInt32(i)), receivedAt: Self.t0 + Int64(i)) }
        let entry = HistorySegment.entryHeaderLength + SampleBatch.headerLength
        for cut in 0..<s.payload.count {
            let (entries, lost) = HistorySegment.entries(payload: Array(s.payload.prefix(cut)), first: Self.t0, declaredCount: 3)
            #expect(entries.count == cut / entry, "cut at \(cut)")
            #expect(entries.count + lost == 3, "cut at \(cut)")
            #expect(entries.allSatisfy { $0.batch != nil })
        }
        // An entry whose bytes do not parse keeps its arrival time; the ones after it still read.
        var damaged = s.payload
        damaged[entry + HistorySegment.entryHeaderLength + 22] = 0xFF   // batch 1's record count: 255 > 200
        let (entries, lost) = HistorySegment.entries(payload: damaged, first: Self.t0, declaredCount: 3)
        #expect(lost == 0 && entries.count == 3)
        #expect(entries.map { $0.batch == nil } == [false, true, false])
        // Seeded garbage never traps.
        var random = SeededRandom(seed: 13)
        for _ in 0..<2_000 {
            let bytes = (0..<Int(random.next() % 80)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            _ = HistorySegment.entries(payload: bytes, first: .max - 5, declaredCount: Int(random.next() % 4))
        }
    }

    @Test func aNodesBatchesWithinASecondShareASegment() {
        // Two nodes interleaved, one batch every 100 ms for 2.5 s, then one arriving earlier.
        var rows: [StoredBatch] = []
        for i in 0..<25 {
            for node in ["a", "b"] {
                rows.append(StoredBatch(node: node, receivedAt: Self.t0 + Int64(i) * 100_000_000, batch: Self.emptyBatch(UInt32(i))))
            }
        }
        rows.append(StoredBatch(node: "a", receivedAt: Self.t0 + 2_000_000_000, batch: Self.emptyBatch(99)))  // time went back
        let segments = HistorySegment.segments(of: rows)
        #expect(segments.map(\.node) == ["a", "b", "a", "b", "a", "b", "a"])
        #expect(segments.map(\.count) == [10, 10, 10, 10, 5, 5, 1])
        #expect(segments.allSatisfy { $0.last - $0.first < HistorySegment.span })
        #expect(segments.map(\.first) == [0, 0, 10, 10, 20, 20, 20].map { Self.t0 + Int64($0) * 100_000_000 })
        #expect(segments.reduce(0) { $0 + $1.count } == rows.count)
    }

    /// What a row per batch gave (ORDER BY received_at, id; BETWEEN; LIMIT), from a model, against
    /// the store over random appends (several nodes, ties, time going back, flushes of any size)
    /// and random ranges and limits.
    @Test func readingBackEqualsARowPerBatch() throws {
        var random = SeededRandom(seed: 2026)
        let store = try HistoryStore(path: ":memory:")
        var model: [StoredBatch] = []
        var clock = Self.t0
        var sequence: UInt32 = 0
        for _ in 0..<60 {
            var flush: [StoredBatch] = []
            for _ in 0..<Int(random.next() % 40) {
                switch random.next() % 10 {
                case 0: clock -= Int64(random.next() % 3_000_000_000)   // the wall clock stepped back
                case 1: break                                          // the same instant again
                default: clock += Int64(random.next() % 400_000_000)
                }
                sequence += 1
                flush.append(StoredBatch(node: ["x", "y", "z"][Int(random.next() % 3)], receivedAt: clock,
                                         batch: Self.emptyBatch(sequence)))
            }
            try store.append(batches: flush)
            model += flush
        }
        #expect(try store.counts().batches == model.count)
        #expect(try store.nodes() == ["x", "y", "z"])
        let ordered = model.enumerated().sorted { ($0.element.receivedAt, $0.offset) < ($1.element.receivedAt, $1.offset) }.map(\.element)
        for node in ["x", "y", "z", "w"] {
            #expect(try store.batches(node: node).batches == ordered.filter { $0.node == node }, "\(node), whole")
        }
        let span = max(1, (model.map(\.receivedAt).max() ?? 0) - (model.map(\.receivedAt).min() ?? 0))
        for _ in 0..<300 {
            let node = ["x", "y", "z"][Int(random.next() % 3)]
            let lo = Self.t0 - 5_000_000_000 + Int64(random.next() % UInt64(span + 10_000_000_000))
            let hi = lo + Int64(random.next() % 6_000_000_000)
            let limit = Int(random.next() % 30)
            let want = Array(ordered.filter { $0.node == node && (lo...hi).contains($0.receivedAt) }.prefix(limit))
            let (got, skipped) = try store.batches(node: node, in: lo...hi, limit: limit)
            #expect(skipped == 0)
            #expect(got == want, "\(node) \(lo)...\(hi) limit \(limit)")
        }
    }

    @Test func aVersion1FileMovesEveryBatchIntoSegments() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("v1.sqlite")
        let rows = sampleBatches(count: 30, node: "old")
        do {
            let queue = try DatabaseQueue(path: path)
            try HistoryStore.migrator(through: "v1").migrate(queue)
            try queue.write { db in
                for (i, r) in rows.enumerated() {
                    var payload = r.batch.encoded()
                    if i == 7 { payload[22] = 0xFF }   // a damaged row stays a skipped one
                    try db.execute(sql: """
                        INSERT INTO batch (node, received_at, epoch, sequence, node_time, payload) VALUES (?, ?, ?, ?, ?, ?)
                        """, arguments: [r.node, r.receivedAt, Int(r.batch.epoch), Int(r.batch.sequence),
                                         r.batch.sentAt.nanoseconds, Data(payload)])
                }
            }
            try queue.close()
        }
        let store = try HistoryStore(path: path)
        #expect(try store.counts().batches == 30)
        let (read, skipped) = try store.batches(node: "old")
        #expect(skipped == 1)
        #expect(read == rows.enumerated().filter { $0.offset != 7 }.map(\.element))
        #expect(try store.integrityCheck() == "ok")
        let tables = try DatabaseQueue(path: path).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        }
        #expect(!tables.contains("batch") && tables.contains("segment"), "\(tables)")
        // New batches land next to the moved ones.
        try store.append(batches: sampleBatches(count: 3, node: "new"))
        #expect(try store.nodes() == ["new", "old"])
    }

    /// v3: one index, time first, instead of a per-node one and a time one (each
    /// commit's row of every node went to a different leaf of the per-node index). A v2 file keeps
    /// its segments, loses both old indexes, and a query by node runs on the new one.
    @Test func aVersion2FileGetsTheTimeFirstIndex() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("v2.sqlite")
        let a = sampleBatches(count: 20, node: "a"), b = sampleBatches(count: 20, node: "b")
        do {
            let queue = try DatabaseQueue(path: path)
            try HistoryStore.migrator(through: "v2-segments").migrate(queue)
            try queue.write { db in try HistoryStore.insert(HistorySegment.segments(of: a + b), db) }
            try queue.close()
        }
        let store = try HistoryStore(path: path)
        let (readA, skipped) = try store.batches(node: "a")
        #expect(skipped == 0)
        #expect(readA == a)
        #expect(try store.batches(node: "b").batches == b)
        #expect(try store.nodes() == ["a", "b"])
        let queue = try DatabaseQueue(path: path)
        let indexes = try queue.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'segment' ORDER BY name")
        }
        #expect(indexes == ["segment_time_node"])
        let details = try queue.read { db in
            try Row.fetchAll(db, sql: """
                EXPLAIN QUERY PLAN SELECT id, first_received_at, batches, payload FROM segment
                WHERE node = 'a' AND first_received_at BETWEEN 0 AND 10 ORDER BY first_received_at, id
                """).map { $0["detail"] as String? ?? "" }
        }
        #expect(details.contains { $0.contains("USING INDEX segment_time_node") }, "\(details)")
        // Rows come in time order from the index; only ties in time are sorted by id (SQLite:
        // "USE TEMP B-TREE FOR RIGHT PART OF ORDER BY"), never the whole result.
        #expect(!details.contains { $0.contains("TEMP B-TREE FOR ORDER BY") }, "no full sort: \(details)")
        try queue.close()
    }

    @Test func retentionGoesASegmentAtATime() throws {
        let store = try HistoryStore(path: ":memory:", retention: RetentionPolicy(
            rawSamples: .seconds(10), aggregates: .seconds(3600), maximumBatches: 12))
        // 20 batches, 100 ms apart from 0 s, one flush: segments [0, 1 s) and [1, 2 s) of 10 each.
        let rows = (0..<20).map { StoredBatch(node: "n", receivedAt: Int64($0) * 100_000_000, batch: Self.emptyBatch(UInt32($0))) }
        try store.append(batches: rows)
        // At 11.5 s the first segment (last at 0.9 s) is older than 10 s; the second (last 1.9 s) still holds
        // batches inside the period, so it stays whole.
        #expect(try store.applyRetention(now: 11_500_000_000).batches == 10)
        #expect(try store.batches(node: "n").batches == Array(rows.suffix(10)))
        // Over the cap of 12 by 3 (10 + 5 new): the oldest segment that covers the excess goes whole.
        let later = (0..<5).map { StoredBatch(node: "n", receivedAt: 5_000_000_000 + Int64($0), batch: Self.emptyBatch(UInt32(100 + $0))) }
        try store.append(batches: later)
        #expect(try store.applyRetention(now: 0).batches == 10)
        #expect(try store.batches(node: "n").batches == later)
    }

    /// The hub calls this every minute (`--retention-days` was read but never applied before).
    @Test func theRecorderAppliesTheRetentionPolicy() throws {
        let recorder = HistoryRecorder(store: try HistoryStore(path: ":memory:", retention: RetentionPolicy(rawSamples: .seconds(10))))
        for i in 0..<30 {
            recorder.record(StoredBatch(node: "n", receivedAt: Int64(i) * 1_000_000_000, batch: Self.emptyBatch(UInt32(i))))
        }
        #expect(recorder.flush() == nil)
        #expect(recorder.applyRetention(now: 25_500_000_000) == nil)
        // Older than 15.5 s: the batches of seconds 0...15 (each its own segment).
        #expect(recorder.expired == 16)
        #expect(try recorder.store?.counts().batches == 14)
        // The kept total follows later appends and deletes without a rescan.
        recorder.record(StoredBatch(node: "n", receivedAt: 40_000_000_000, batch: Self.emptyBatch(99)))
        #expect(recorder.flush() == nil)
        #expect(recorder.applyRetention(now: 45_000_000_000) == nil)
        #expect(recorder.expired == 30)
        #expect(try recorder.store?.counts().batches == 1)
        let off = HistoryRecorder(path: nil)
        #expect(off.applyRetention(now: 0) == nil && off.expired == 0)
    }
}
