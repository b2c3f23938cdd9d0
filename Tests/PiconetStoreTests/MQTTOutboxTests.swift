import Foundation
import PiconetStore
import Testing

/// The MQTT export's durable outbox (bounded, ordered, survives a crash).
@Suite struct MQTTOutboxTests {
    static func message(_ topic: String, _ seq: UInt64, _ priority: OutboxMessage.Priority = .sample) -> OutboxMessage {
        OutboxMessage(topic: topic, payload: Array(#"{"seq":\#(seq)}"#.utf8), retain: priority == .state, priority: priority, sequence: seq)
    }

    @Test func storedInOrderDeletedOnAcknowledgement() throws {
        let outbox = try MQTTOutbox(path: ":memory:")
        let (stored, drops) = try outbox.append((1...5).map { Self.message("piconet/h/n/hr", $0) })
        #expect(drops.total == 0)
        #expect(outbox.count == 5)
        #expect(stored.map(\.id) == stored.map(\.id).sorted())
        let firstTwo = try outbox.messages(after: 0, limit: 2)
        #expect(firstTwo.map(\.sequence) == [1, 2])
        #expect(try outbox.messages(after: firstTwo[1].id, limit: 10).map(\.sequence) == [3, 4, 5])
        try outbox.delete([firstTwo[0].id, firstTwo[1].id, 999_999])
        #expect(outbox.count == 3, "an unknown id (already dropped) is ignored")
        #expect(try outbox.messages(after: 0, limit: 10).map(\.sequence) == [3, 4, 5])
        #expect(try outbox.messages(after: 0, limit: 1).first?.payload == Array(#"{"seq":3}"#.utf8))
        #expect(try outbox.sequences() == ["piconet/h/n/hr": 5])
    }

    /// A forgotten node's numbers go; a node whose level only matches as a LIKE pattern
    /// (`_` is a wildcard there) keeps its own; the queued messages stay (they are owed to the broker).
    @Test func forgettingANodeDeletesOnlyItsSequences() throws {
        let outbox = try MQTTOutbox(path: ":memory:")
        try outbox.append([Self.message("piconet/h/n_1/state", 4, .state), Self.message("piconet/h/n_1/hr", 9),
                           Self.message("piconet/h/nx1/hr", 3), Self.message("piconet/h/n_10/hr", 2)])
        try outbox.forgetSequences(topicPrefix: "piconet/h/n_1/")
        #expect(try outbox.sequences() == ["piconet/h/nx1/hr": 3, "piconet/h/n_10/hr": 2])
        #expect(outbox.count == 4)
    }

    @Test func boundedSamplesDroppedFirstSummariesKept() throws {
        let outbox = try MQTTOutbox(path: ":memory:", capacity: 4, hardLimit: 6)
        try outbox.append([Self.message("s", 1, .summary), Self.message("hr", 1), Self.message("st", 1, .state), Self.message("hr", 2)])
        let (_, drops) = try outbox.append([Self.message("hr", 3), Self.message("s", 2, .summary)])
        #expect(drops.samples == 2, "the two oldest samples go")
        #expect(outbox.count == 4)
        #expect(try outbox.messages(after: 0, limit: 10).map { "\($0.topic)\($0.sequence)" } == ["s1", "st1", "hr3", "s2"])
        // Only summaries and a state left over capacity: the state goes, summaries stay up to the hard limit.
        try outbox.append([Self.message("s", 3, .summary), Self.message("s", 4, .summary)])
        #expect(try outbox.messages(after: 0, limit: 10).map { "\($0.topic)\($0.sequence)" } == ["s1", "s2", "s3", "s4"])
        try outbox.append([Self.message("s", 5, .summary), Self.message("s", 6, .summary), Self.message("s", 7, .summary)])
        #expect(outbox.count == 6)
        #expect(outbox.dropped.samples == 3 && outbox.dropped.states == 1 && outbox.dropped.summaries == 1)
        #expect(try outbox.messages(after: 0, limit: 10).first?.sequence == 2, "past the hard limit the oldest summary goes")
    }

    /// What a `kill -9` leaves on disk: the database and its WAL copied while the outbox is still
    /// open (no checkpoint, no close). Everything `append` returned for is in the copy; deleted rows are not.
    @Test func survivesACrash() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("outbox.sqlite")
        let outbox = try MQTTOutbox(path: path)
        let stored = try outbox.append((1...100).map { Self.message("piconet/h/n/hr", $0) }).stored
        try outbox.append([Self.message("piconet/h/n/summary", 1, .summary)])
        try outbox.delete(stored.prefix(10).map(\.id))
        let fm = FileManager.default
        let crash = dir.file("crash.sqlite")
        try fm.copyItem(atPath: path, toPath: crash)
        if fm.fileExists(atPath: path + "-wal") { try fm.copyItem(atPath: path + "-wal", toPath: crash + "-wal") }
        let reopened = try MQTTOutbox(path: crash)
        #expect(reopened.count == 91)
        let rows = try reopened.messages(after: 0, limit: 1000)
        #expect(rows.map(\.sequence) == Array(11...100) + [1])
        #expect(try reopened.sequences() == ["piconet/h/n/hr": 100, "piconet/h/n/summary": 1])
        outbox.close()
        reopened.close()
    }

    @Test func unwritablePathIsAClearError() {
        #expect(throws: StoreError.self) { try MQTTOutbox(path: "/nonexistent-dir/outbox.sqlite") }
    }

    /// The exporter stages a loop turn's messages and commits them together: staged messages are
    /// neither counted nor readable (so never sent) before the commit, come out in order after
    /// it in one transaction, and a crash before the commit keeps only what was committed.
    @Test func stagedMessagesAreStoredOnlyByTheCommit() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("outbox.sqlite")
        let outbox = try MQTTOutbox(path: path, stageLimit: 5)
        #expect(outbox.stage((1...2).map { Self.message("hr", $0) }) == false)
        #expect(outbox.stage([Self.message("motion", 1)]) == false)
        #expect(outbox.count == 0 && outbox.staged.count == 3)
        #expect(try outbox.messages(after: 0, limit: 10).isEmpty, "nothing staged can be read back (sent) before its commit")
        let (stored, _) = try outbox.commitStaged()
        #expect(stored.map { "\($0.topic)\($0.sequence)" } == ["hr1", "hr2", "motion1"])
        #expect(outbox.count == 3 && outbox.staged.isEmpty)
        #expect(try outbox.commitStaged().stored.isEmpty, "an empty stage commits nothing")
        #expect(outbox.stage((3...7).map { Self.message("hr", $0) }) == true, "at the stage limit: commit now")
        // A crash here: the reopened file has what was committed, not what was only staged.
        let fm = FileManager.default
        let crash = dir.file("crash.sqlite")
        try fm.copyItem(atPath: path, toPath: crash)
        if fm.fileExists(atPath: path + "-wal") { try fm.copyItem(atPath: path + "-wal", toPath: crash + "-wal") }
        let reopened = try MQTTOutbox(path: crash)
        #expect(reopened.count == 3)
        #expect(try reopened.sequences() == ["hr": 2, "motion": 1], "numbering continues after the committed messages: no gap")
        try outbox.commitStaged()
        #expect(try outbox.messages(after: 0, limit: 10).map(\.sequence) == [1, 2, 1, 3, 4, 5, 6, 7])
        outbox.close()
        reopened.close()
    }

    @Test func commitAfterCloseIsAnErrorAndEmptiesTheStage() {
        let outbox = try? MQTTOutbox(path: ":memory:")
        outbox?.close()
        _ = outbox?.stage([Self.message("hr", 1)])
        #expect(throws: StoreError.closed) { try outbox?.commitStaged() }
        #expect(outbox?.staged.isEmpty == true)
    }
}
