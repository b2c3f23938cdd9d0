import Foundation
import GRDB
import PiconetHub
import PiconetLoop
import PiconetSensors
@testable import PiconetStore
import Testing

/// A fresh temporary directory, removed by `cleanup()`.
struct TempDir {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("piconet-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func file(_ name: String) -> String { path + "/" + name }
    func cleanup() { try? FileManager.default.removeItem(atPath: path) }
}

func sampleBatches(count: Int, node: String = "n1", seed: UInt64 = 1) -> [StoredBatch] {
    var w = SimulatedWearable(seed: seed, start: .zero)
    var b = SampleBatcher(epoch: 7)
    var out: [StoredBatch] = []
    var now = Instant.zero
    while out.count < count {
        now += .milliseconds(100)
        for s in w.samples(upTo: now) {
            for batch in b.add(s, at: now) where out.count < count {
                out.append(StoredBatch(node: node, receivedAt: 1_700_000_000_000_000_000 + now.nanoseconds, batch: batch))
            }
        }
    }
    return out
}

func someAggregate(node: String, at: Int64) -> StoredAggregate {
    var hub = Aggregator()
    for b in sampleBatches(count: 40, node: node) {
        hub.received(.samples(b.batch), from: NodeID(node), at: b.batch.sentAt)
    }
    let stats = hub.stats(for: NodeID(node), window: .tenSeconds, at: Instant(nanoseconds: 4_000_000_000))
    return StoredAggregate(node: node, at: at, stats: stats ?? WindowStats(empty: .tenSeconds))
}

@Suite struct HistoryStoreTests {
    @Test func storesRawBatchesAndAggregatesWithARollbackJournal() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("history.sqlite")
        let batches = sampleBatches(count: 50)
        let agg = someAggregate(node: "n1", at: 42)
        #expect(agg.stats.bpmMean != nil && agg.stats.rmssd != nil, "the aggregate has real content")
        do {
            let store = try HistoryStore(path: path)
            #expect(try store.journalMode() == "truncate")
            try store.append(batches: batches)
            try store.append(aggregates: [agg])
            store.close()
            #expect(throws: StoreError.closed) { try store.counts() }
        }
        let reopened = try HistoryStore(path: path)
        let (read, skipped) = try reopened.batches(node: "n1")
        #expect(skipped == 0)
        #expect(read == batches)
        #expect(try reopened.aggregates(node: "n1", window: .tenSeconds) == [agg])
        #expect(try reopened.nodes() == ["n1"])
        // Compact: the raw payload of 50 batches of ~11 motion samples stays small.
        let bytes = batches.reduce(0) { $0 + $1.batch.encodedLength }
        #expect(bytes / 50 <= 200)
    }

    @Test func retentionDropsOldRowsAndCapsBatches() throws {
        let store = try HistoryStore(path: ":memory:", retention: RetentionPolicy(
            rawSamples: .seconds(60), aggregates: .seconds(3600), maximumBatches: 30))
        var rows = sampleBatches(count: 50)
        for i in rows.indices { rows[i].receivedAt = Int64(i) * 2_000_000_000 } // one every 2 s: 0…98 s
        try store.append(batches: rows)
        try store.append(aggregates: [someAggregate(node: "n1", at: 0), someAggregate(node: "n1", at: 3_000_000_000_000)])
        let now: Int64 = 100_000_000_000
        let gone = try store.applyRetention(now: now)
        // Older than 40 s: rows 0…19 (20 rows) go by age; 30 remain, within the cap.
        #expect(gone.batches == 20)
        #expect(gone.aggregates == 0)
        #expect(try store.counts().batches == 30)
        let left = try store.batches(node: "n1").batches
        #expect(left.first?.receivedAt == 40_000_000_000)
        let later = try store.applyRetention(now: 3_600_000_000_000 + 1)
        #expect(later.aggregates == 1)

        let capped = try HistoryStore(path: ":memory:", retention: RetentionPolicy(maximumBatches: 10))
        try capped.append(batches: rows)
        #expect(try capped.applyRetention(now: 0).batches == 40)
        #expect(try capped.batches(node: "n1").batches.map(\.receivedAt) == rows.suffix(10).map(\.receivedAt))
    }

    @Test func recorderStoresSnapshotsOfEveryWindow() throws {
        let recorder = HistoryRecorder(store: try HistoryStore(path: ":memory:"))
        var hub = Aggregator()
        for b in sampleBatches(count: 30, node: "x") { hub.received(.samples(b.batch), from: "x", at: b.batch.sentAt) }
        let now = Instant(nanoseconds: 3_000_000_000)
        recorder.record(hub.snapshots(at: now), at: 77)
        #expect(recorder.flush() == nil)
        #expect(recorder.mode == .persisting)
        let store = try #require(recorder.store)
        for w in AggregationWindow.allCases {
            let rows = try store.aggregates(node: "x", window: w)
            #expect(rows.count == 1)
            #expect(rows.first?.stats == hub.stats(for: "x", window: w, at: now), "\(w)")
        }
        #expect(recorder.statusLine.contains("3 rows written"))
    }

    @Test func anUnwritablePathIsAClearError() {
        do {
            _ = try HistoryStore(path: "/nonexistent-piconet-dir/history.sqlite")
            Issue.record("opening under a missing directory succeeded")
        } catch {
            guard case let .unwritable(path, reason) = error else { Issue.record("got \(error)"); return }
            #expect(path == "/nonexistent-piconet-dir/history.sqlite")
            #expect(reason.contains("does not exist"))
            #expect(error.description.contains("choose a writable path"))
        }
        // /proc refuses new files even to root.
        #expect(throws: StoreError.self) { _ = try HistoryStore(path: "/proc/piconet-history.sqlite") }
        let recorder = HistoryRecorder(path: "/proc/piconet-history.sqlite")
        guard case .memoryOnly(let e) = recorder.mode else { Issue.record("recorder did not fall back: \(recorder.mode)"); return }
        // Nothing could ever write a queued row: it is counted as not recorded, not kept.
        recorder.record(StoredBatch(node: "n", receivedAt: 1, batch: SampleBatch(sequence: 1, epoch: 1, sentAt: .zero, samples: [])))
        #expect(recorder.pendingBatches.isEmpty && recorder.notRecorded == 1)
        #expect(recorder.statusLine.contains("NOT RECORDED"), "\(e)")
    }

    @Test func aParentThatIsAFileIsAClearErrorToo() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let file = dir.file("plain-file")
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        do {
            _ = try HistoryStore(path: file + "/history.sqlite")
            Issue.record("opening under a plain file succeeded")
        } catch {
            guard case let .unwritable(_, reason) = error else { Issue.record("got \(error)"); return }
            #expect(reason == "directory \(file) does not exist")
        }
        #expect(HistoryStore.directory(of: "/var/lib/piconet/history.sqlite") == "/var/lib/piconet")
        #expect(HistoryStore.directory(of: "/history.sqlite") == "/")
        #expect(HistoryStore.directory(of: "history.sqlite") == "")
        #expect(HistoryStore.directory(of: "db/h.sqlite") == "db")
    }

    /// A payload damaged on disk is skipped and counted, the rows around it still read: the blob
    /// read copies exactly the stored bytes (no Foundation `Data` in between) into the checked parser.
    @Test func aDamagedPayloadIsSkippedAndCounted() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("damaged.sqlite")
        var batches = sampleBatches(count: 5)
        for i in batches.indices { batches[i].receivedAt = 1_700_000_000_000_000_000 + Int64(i) * 1_000_000_000 }
        do {
            let store = try HistoryStore(path: path)
            try store.append(batches: batches)
            store.close()  // the last connection checkpoints the WAL into the main file
        }
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the WAL was checkpointed on close")
        var file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let victim = batches[2].batch.encoded()
        let at = try #require((0...(file.count - victim.count)).first { file[$0..<($0 + victim.count)].elementsEqual(victim) },
                              "the third batch's payload is in the file as written")
        file[at + 22] = 0xFF  // the record count: 255 > SampleBatch.maximumRecords, so it no longer parses
        try Data(file).write(to: URL(fileURLWithPath: path))

        let reopened = try HistoryStore(path: path)
        let (read, skipped) = try reopened.batches(node: "n1")
        #expect(skipped == 1)
        #expect(read == batches.enumerated().filter { $0.offset != 2 }.map(\.element))
        #expect(try reopened.batches(node: "n1", limit: 2).batches == Array(batches.prefix(2)), "LIMIT is bound")
        #expect(try reopened.batches(node: "nobody").batches.isEmpty, "the node is bound")
        let window = batches[3].receivedAt ... batches[4].receivedAt
        #expect(try reopened.batches(node: "n1", in: window).batches == Array(batches[3...4]), "the range is bound")
    }

    @Test func aFullDiskKeepsTheHubGoingInMemory() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        // A 40-page (160 KiB) limit stands in for a full SD card: SQLite reports SQLITE_FULL the same way.
        let store = try HistoryStore(path: dir.file("full.sqlite"), maximumPageCount: 40)
        let recorder = HistoryRecorder(store: store, pendingLimit: 100_000)
        let rows = sampleBatches(count: 3000)
        var failure: StoreError?
        for chunk in stride(from: 0, to: rows.count, by: 100) {
            for r in rows[chunk..<min(chunk + 100, rows.count)] { recorder.record(r) }
            if let e = recorder.flush() { failure = e; break }
        }
        let e = try #require(failure, "160 KiB cannot hold 3000 batches")
        #expect(e == .diskFull(path: dir.file("full.sqlite")))
        #expect(recorder.mode == .memoryOnly(e))
        #expect(recorder.pendingBatches.count == 100, "the failed transaction's rows are kept, not lost")
        #expect(recorder.statusLine.contains("full"))
        // Everything committed before the failure is intact and readable.
        let stored = try store.counts().batches
        #expect(stored == recorder.written)
        #expect(stored > 0)
        #expect(try store.integrityCheck() == "ok")
        #expect(try store.batches(node: "n1").batches == Array(rows.prefix(stored)))
    }

    /// A flush is one transaction for batches and aggregates together: when it fails nothing of
    /// it is stored and everything stays queued; the flush that succeeds later stores each row
    /// exactly once (no duplicate of a half-written flush, nothing lost that was reported written).
    @Test func aFlushStoresBatchesAndAggregatesAllOrNone() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("flush.sqlite")
        let recorder = HistoryRecorder(store: try HistoryStore(path: path, maximumPageCount: 40))
        let rows = sampleBatches(count: 3000)
        var failed: StoreError?
        var flushes = 0
        for chunk in stride(from: 0, to: rows.count, by: 100) {
            for r in rows[chunk..<min(chunk + 100, rows.count)] { recorder.record(r) }
            recorder.record(someAggregate(node: "n1", at: Int64(chunk)))
            flushes += 1
            if let e = recorder.flush() { failed = e; break }
        }
        let store = try #require(recorder.store)
        #expect(failed == .diskFull(path: path), "40 pages cannot hold 3000 batches")
        let counts = try store.counts()
        // Every successful flush stored its 100 batches and its one aggregate; the failed one nothing.
        #expect(counts.batches == (flushes - 1) * 100 && counts.aggregates == flushes - 1)
        #expect(recorder.written == counts.batches + counts.aggregates)
        #expect(recorder.pendingBatches.count == 100 && recorder.pendingAggregates.count == 1)
        // The same rows, flushed into a store with room, are written once.
        let roomy = HistoryRecorder(store: try HistoryStore(path: dir.file("roomy.sqlite")))
        for r in recorder.pendingBatches { roomy.record(r) }
        for a in recorder.pendingAggregates { roomy.record(a) }
        #expect(roomy.flush() == nil)
        #expect(roomy.flush() == nil, "an empty flush writes nothing")
        #expect(try roomy.store?.counts().batches == 100 && roomy.store?.counts().aggregates == 1)
        #expect(try roomy.store?.batches(node: "n1").batches == Array(recorder.pendingBatches))
    }

    @Test func anUncleanCloseKeepsEveryCommit() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("live.sqlite")
        let store = try HistoryStore(path: path)
        let rows = sampleBatches(count: 200)
        for r in rows { try store.append(batches: [r]) }
        // Copy the file while the writer still has it open between commits: exactly what a crash
        // leaves on disk (a rollback journal holds nothing once its commit returned).
        let fm = FileManager.default
        let crash = dir.file("crash.sqlite")
        try fm.copyItem(atPath: path, toPath: crash)
        #expect(!fm.fileExists(atPath: path + "-wal"), "no WAL: every commit is in the file itself")
        let recovered = try HistoryStore(path: crash)
        #expect(try recovered.counts().batches == 200)
        #expect(try recovered.integrityCheck() == "ok")
        #expect(try recovered.batches(node: "n1").batches == rows)
        store.close()
    }

    /// A file an earlier hub left in WAL mode, with commits still in its WAL, opens with every
    /// row and leaves WAL mode.
    @Test func aFileInWALModeIsTakenOverWithItsRows() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("old.sqlite")
        let rows = sampleBatches(count: 50)
        let old = try DatabaseQueue(path: path, configuration: { var c = Configuration(); c.journalMode = .wal; return c }())
        try HistoryStore.migrator.migrate(old)
        try old.write { db in try db.execute(sql: "PRAGMA wal_autocheckpoint = 0") }
        let copy = try HistoryStore(path: dir.file("rows.sqlite"))
        try copy.append(batches: rows)
        copy.close()
        try old.write { db in try db.execute(sql: "ATTACH ? AS src; INSERT INTO segment SELECT * FROM src.segment", arguments: [dir.file("rows.sqlite")]) }
        try old.writeWithoutTransaction { db in try db.execute(sql: "DETACH src") }
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try old.close()
        let store = try HistoryStore(path: path)
        #expect(try store.journalMode() == "truncate")
        #expect(try store.batches(node: "n1").batches == rows)
        store.close()
    }

    /// Where `swift build` puts the helper: beside the test bundle.
    static let toolPath: String? = {
        let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for dir in [bundleDir, bundleDir.deletingLastPathComponent()] {
            let p = dir.appendingPathComponent("piconet-store-tool").path
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }()

    @Test(.enabled(if: HistoryStoreTests.toolPath != nil,
                   "needs the piconet-store-tool binary beside the test bundle (run `swift build` first)"))
    func aWriterKilledWithSIGKILLLosesNothingCommitted() async throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("killed.sqlite")
        let child = Process()
        child.executableURL = URL(fileURLWithPath: HistoryStoreTests.toolPath ?? "/nonexistent")
        child.arguments = ["write-until-killed", path]
        let pipe = Pipe()
        child.standardOutput = pipe
        try child.run()
        // Read "committed N" lines until well into the run, then kill -9 mid-write.
        var lastCommitted = 0
        var buffer = ""
        let handle = pipe.fileHandleForReading
        while lastCommitted < 300 {
            let data = handle.availableData
            if data.isEmpty { break }
            buffer += String(decoding: data, as: UTF8.self)
            let lines = buffer.split(separator: "\n", omittingEmptySubsequences: false)
            buffer = String(lines.last ?? "")
            for line in lines.dropLast() where line.hasPrefix("committed ") {
                lastCommitted = Int(line.dropFirst(10)) ?? lastCommitted
            }
        }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(child.terminationReason == .uncaughtSignal)
        #expect(lastCommitted >= 300, "the child committed before it died")
        let store = try HistoryStore(path: path)
        let count = try store.counts().batches
        // Every commit the child reported is there; at most the ones in flight after it.
        #expect(count >= lastCommitted, "stored \(count), child reported \(lastCommitted)")
        #expect(try store.integrityCheck() == "ok")
        let (batches, skipped) = try store.batches(node: "child")
        #expect(skipped == 0)
        #expect(batches.map(\.batch.sequence) == (0..<UInt32(count)).map { $0 }, "no holes, no torn rows")
    }

    /// A hub killed with SIGKILL loses at most the rows of its last commit interval: a child
    /// records as the hub does (virtual clock, 5 s interval) until 3 commits and 4.9 s more are
    /// in, says so and waits; killed then, the file holds exactly the committed rows, sound.
    /// With a spool whose sync interval (an hour) the child never reaches, every commit is in
    /// the spool only, and reopening the file with it moves them all in.
    @Test(.enabled(if: HistoryStoreTests.toolPath != nil,
                   "needs the piconet-store-tool binary beside the test bundle (run `swift build` first)"),
          arguments: [false, true])
    func aKillLosesAtMostTheLastCommitInterval(spooled: Bool) throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("killed.sqlite")
        let spool = dir.file("killed.spool")
        let child = Process()
        child.executableURL = URL(fileURLWithPath: HistoryStoreTests.toolPath ?? "/nonexistent")
        child.arguments = ["record-then-wait", path, "5", "3"] + (spooled ? [spool, "3600"] : [])
        let output = Pipe(), input = Pipe()
        child.standardOutput = output
        child.standardInput = input
        try child.run()
        var text = ""
        let handle = output.fileHandleForReading
        while !text.contains("\n") {
            let data = handle.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        try input.fileHandleForWriting.close()
        #expect(child.terminationReason == .uncaughtSignal, "killed while waiting, not exited")
        // "committed C recorded R last-commit-ns T"
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        let numbers = stride(from: 1, to: words.count, by: 2).compactMap { Int(words[$0]) }
        try #require(numbers.count == 3, "the child's line: \(text)")
        let (committed, recorded, lastCommit) = (numbers[0], numbers[1], Int64(numbers[2]))
        #expect(committed > 0 && recorded > committed, "rows were at risk when it died")
        if spooled {
            let bare = try HistoryStore(path: path)
            #expect(try bare.counts().batches == 0, "the commits went to the spool, not the file")
            bare.close()
        }
        let store = try HistoryStore(path: path, spoolPath: spooled ? spool : nil)
        #expect(try store.spooledRows() == 0, "opening moved the spool into the file")
        #expect(try store.integrityCheck() == "ok")
        let (kept, skipped) = try store.batches(node: "child")
        #expect(skipped == 0)
        #expect(kept.count == committed, "every committed row, none after")
        #expect(kept.map(\.batch.sequence) == (0..<UInt32(kept.count)).map { $0 }, "no holes, no torn rows")
        #expect(kept.allSatisfy { $0.receivedAt <= lastCommit }, "what was kept was recorded by the last commit")
        // The child's rows again (same seed): kept are exactly those recorded by the last commit,
        // lost exactly those of the 4.9 s after it.
        var w = SimulatedWearable(seed: 1, start: .zero)
        var b = SampleBatcher(epoch: 1)
        var times: [Int64] = []
        var now = Instant.zero
        while times.count < recorded {
            now += .milliseconds(100)
            for s in w.samples(upTo: now) { for _ in b.add(s, at: now) { times.append(now.nanoseconds) } }
        }
        #expect(times.count == recorded, "the child stops between ticks")
        #expect(lastCommit == 15_000_000_000, "three commits of 5 s")
        #expect(kept.map(\.receivedAt) == times.filter { $0 <= lastCommit })
        #expect(times.suffix(recorded - committed).allSatisfy { $0 > lastCommit && $0 < lastCommit + 5_000_000_000 },
                "what was lost is the last interval's rows only")
        store.close()
    }
}
