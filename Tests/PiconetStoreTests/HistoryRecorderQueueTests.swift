import PiconetHub
import PiconetLoop
import PiconetSensors
import PiconetStore
import Testing

/// The recorder's queue while rows wait for a flush (a store that is slow or failing): bounded,
/// oldest dropped and counted, in order; a full queue drops in O(1) (`removeFirst`
/// moved the whole queue per row). Without a database (`--db off`) nothing is queued at all.
@Suite struct HistoryRecorderQueueTests {
    /// A recorder over an in-memory store that is never flushed: only the queue is exercised.
    static func unflushed(limit: Int) throws -> HistoryRecorder {
        HistoryRecorder(store: try HistoryStore(path: ":memory:"), pendingLimit: limit)
    }

    static func row(_ i: Int) -> StoredBatch {
        StoredBatch(node: "n", receivedAt: Int64(i), batch: SampleBatch(sequence: UInt32(i), epoch: 1, sentAt: .zero, samples: []))
    }

    @Test func aFullQueueDropsTheOldestInOrderAndCountsThem() throws {
        let recorder = try Self.unflushed(limit: 100)
        for i in 0..<1_000 { recorder.record(Self.row(i)) }
        #expect(recorder.pendingBatches.map(\.receivedAt) == (900..<1_000).map(Int64.init))
        #expect(recorder.dropped == 900)
        recorder.record(Self.row(1_000))
        #expect(recorder.pendingBatches.first?.receivedAt == 901 && recorder.pendingBatches.last?.receivedAt == 1_000)
        #expect(recorder.pendingBatches.count == 100)
    }

    @Test func aQueueBelowItsLimitKeepsEverything() throws {
        let recorder = try Self.unflushed(limit: 100)
        for i in 0..<60 { recorder.record(Self.row(i)) }
        #expect(recorder.pendingBatches.map(\.receivedAt) == (0..<60).map(Int64.init))
        #expect(recorder.dropped == 0)
    }

    /// `--db off`: rows and aggregates offered leave the queues empty (no memory grows with the
    /// fleet) and are counted as not recorded, which the status line says.
    @Test func withoutADatabaseNothingIsQueuedAndEveryRowIsCountedAsNotRecorded() {
        let recorder = HistoryRecorder(path: nil, pendingLimit: 100)
        #expect(recorder.mode == .off)
        for i in 0..<1_000 { recorder.record(Self.row(i)) }
        recorder.record(StoredAggregate(node: "n", at: 1, stats: WindowStats(empty: .tenSeconds)))
        var hub = Aggregator()
        hub.received(.samples(SampleBatch(sequence: 1, epoch: 1, sentAt: .zero, samples: [])), from: "a", at: .zero)
        hub.received(.samples(SampleBatch(sequence: 1, epoch: 1, sentAt: .zero, samples: [])), from: "b", at: .zero)
        recorder.record(hub.snapshots(at: .zero), at: 5)
        #expect(recorder.pendingBatches.isEmpty && recorder.pendingAggregates.isEmpty)
        #expect(recorder.notRecorded == 1_000 + 1 + 2 * AggregationWindow.allCases.count)
        #expect(recorder.dropped == 0, "not recorded is not a queue overflow")
        #expect(recorder.flush() == nil)
        #expect(recorder.written == 0)
        #expect(recorder.statusLine.contains("off") && recorder.statusLine.contains("1007 rows not recorded"), "\(recorder.statusLine)")
    }

    /// With a database the same rows are queued and all reach the store on flush.
    @Test func withADatabaseEveryRowIsQueuedAndWritten() throws {
        let recorder = try Self.unflushed(limit: 10_000)
        for i in 0..<1_000 { recorder.record(Self.row(i)) }
        #expect(recorder.pendingBatches.count == 1_000 && recorder.notRecorded == 0)
        #expect(recorder.flush() == nil)
        #expect(recorder.pendingBatches.isEmpty && recorder.written == 1_000)
        #expect(try recorder.store?.counts().batches == 1_000)
    }

    /// Rows are committed once per commit interval (monotonic time, the runtime's tick each
    /// second), not at every tick: few large commits are what keeps an SD card's writes low.
    @Test func rowsAreCommittedOncePerIntervalNotPerTick() throws {
        let recorder = HistoryRecorder(store: try HistoryStore(path: ":memory:"), commitInterval: .seconds(30))
        var committedAt: [Int] = []
        for second in 0...95 {
            recorder.record(Self.row(second))
            let before = recorder.written
            #expect(recorder.flushIfDue(at: Instant.zero + .seconds(Int64(second))) == nil)
            if recorder.written > before { committedAt.append(second) }
        }
        #expect(committedAt == [30, 60, 90], "a commit each 30 s, the first interval starting at the first tick")
        #expect(recorder.written == 91 && recorder.pendingCount == 5, "the last interval's rows still wait")
        #expect(recorder.flush() == nil)
        #expect(try recorder.store?.counts().batches == 96, "an orderly stop commits the rest")
    }

    /// A queue half full (or holding `commitRows`) commits before the interval is up, so a large
    /// fleet's rows are not dropped for want of a commit.
    @Test func aHalfFullQueueCommitsBeforeTheInterval() throws {
        let recorder = HistoryRecorder(store: try HistoryStore(path: ":memory:"), pendingLimit: 100, commitInterval: .seconds(3600))
        recorder.flushIfDue(at: .zero)
        for i in 0..<49 { recorder.record(Self.row(i)) }
        recorder.flushIfDue(at: .zero + .seconds(1))
        #expect(recorder.written == 0 && recorder.pendingCount == 49)
        recorder.record(Self.row(49))
        recorder.flushIfDue(at: .zero + .seconds(2))
        #expect(recorder.written == 50 && recorder.pendingCount == 0 && recorder.dropped == 0)
        let large = HistoryRecorder(store: try HistoryStore(path: ":memory:"), commitInterval: .seconds(3600))
        large.flushIfDue(at: .zero)
        for i in 0..<HistoryRecorder.commitRows { large.record(Self.row(i)) }
        large.flushIfDue(at: .zero + .seconds(1))
        #expect(large.written == HistoryRecorder.commitRows, "a commit's worth of rows does not wait for the interval")
    }
}
