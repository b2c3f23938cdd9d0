import Foundation
import PiconetLoop
import PiconetSensors
import PiconetStore
import Testing

/// The spool: commits land in it every commit interval and move into the history file every
/// sync interval; an idle recorder touches neither file; rows committed by a connection that
/// was never closed (a killed hub) are in the file once it is opened again.
@Suite struct HistorySpoolTests {
    /// Batch `i` arrives in second `i`, so each is a segment (a row) of its own.
    static func row(_ i: Int) -> StoredBatch {
        StoredBatch(node: "n", receivedAt: Int64(i) * 1_000_000_000,
                    batch: SampleBatch(sequence: UInt32(i), epoch: 1, sentAt: .zero, samples: []))
    }

    static func stamp(_ path: String) throws -> String {
        let a = try FileManager.default.attributesOfItem(atPath: path)
        return "\(a[.size] ?? 0) \((a[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0)"
    }

    @Test func commitsGoToTheSpoolAndMoveIntoTheFileEverySyncInterval() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("h.sqlite"), spool = dir.file("h.spool")
        let store = try HistoryStore(path: path, spoolPath: spool)
        let recorder = HistoryRecorder(store: store, commitInterval: .seconds(1), syncInterval: .seconds(10))
        let t0 = Instant.zero
        recorder.flushIfDue(at: t0)
        for i in 0..<5 { recorder.record(Self.row(i)) }
        #expect(recorder.flushIfDue(at: t0 + .seconds(1)) == nil)
        #expect(recorder.pendingCount == 0 && recorder.spooledCount == 5 && recorder.written == 5)
        #expect(try store.spooledRows() == 5 && store.counts().batches == 0, "committed to the spool only")
        for i in 5..<8 { recorder.record(Self.row(i)) }
        recorder.flushIfDue(at: t0 + .seconds(10))
        #expect(try store.spooledRows() == 8 && store.counts().batches == 0, "9 s after the first spooled row: still spooled")
        recorder.flushIfDue(at: t0 + .seconds(11))
        #expect(try store.spooledRows() == 0 && store.counts().batches == 8, "10 s after it: all in the file")
        #expect(try store.batches(node: "n").batches.map(\.batch.sequence) == Array(0..<8))

        // Idle: nothing queued or spooled, so no call writes to either file.
        let before = try [Self.stamp(path), Self.stamp(spool)]
        for s in 12..<80 { #expect(recorder.flushIfDue(at: t0 + .seconds(Int64(s))) == nil) }
        #expect(try [Self.stamp(path), Self.stamp(spool)] == before, "an idle recorder wrote")

        // Committed to the spool, then the connection is abandoned (never closed): a second
        // opening (the restarted hub) moves those rows into the file, after the others.
        for i in 8..<10 { recorder.record(Self.row(i)) }
        recorder.flushIfDue(at: t0 + .seconds(81))
        #expect(try store.spooledRows() == 2)
        let reopened = try HistoryStore(path: path, spoolPath: spool)
        #expect(try reopened.counts().batches == 10)
        #expect(try reopened.batches(node: "n").batches.map(\.batch.sequence) == Array(0..<10))
        #expect(try reopened.spooledRows() == 0 && reopened.integrityCheck() == "ok")
        store.close()
        reopened.close()
        #expect(!FileManager.default.fileExists(atPath: spool), "an empty spool is removed on close")
    }
}
