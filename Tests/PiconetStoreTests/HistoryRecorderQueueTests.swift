import PiconetLoop
import PiconetSensors
import PiconetStore
import Testing

/// The recorder's queue without a database (`--db off`): bounded, oldest dropped and counted,
/// in order; a full queue drops in O(1) (issue 13: `removeFirst` moved the whole queue per row).
@Suite struct HistoryRecorderQueueTests {
    static func row(_ i: Int) -> StoredBatch {
        StoredBatch(node: "n", receivedAt: Int64(i), batch: SampleBatch(sequence: UInt32(i), epoch: 1, sentAt: .zero, samples: []))
    }

    @Test func aFullQueueDropsTheOldestInOrderAndCountsThem() {
        let recorder = HistoryRecorder(path: nil, pendingLimit: 100)
        for i in 0..<1_000 { recorder.record(Self.row(i)) }
        #expect(recorder.pendingBatches.map(\.receivedAt) == (900..<1_000).map(Int64.init))
        #expect(recorder.dropped == 900)
        recorder.record(Self.row(1_000))
        #expect(recorder.pendingBatches.first?.receivedAt == 901 && recorder.pendingBatches.last?.receivedAt == 1_000)
        #expect(recorder.pendingBatches.count == 100)
    }

    @Test func aQueueBelowItsLimitKeepsEverything() {
        let recorder = HistoryRecorder(path: nil, pendingLimit: 100)
        for i in 0..<60 { recorder.record(Self.row(i)) }
        #expect(recorder.pendingBatches.map(\.receivedAt) == (0..<60).map(Int64.init))
        #expect(recorder.dropped == 0)
    }
}
