import Glibc
import PiconetGroup
import PiconetGroupRuntime
import PiconetLoop
import PiconetPosix
import PiconetSession
import Testing

private let a = MemberID(high: 1, low: 1)
private let b = MemberID(high: 2, low: 2)
private let c = MemberID(high: 3, low: 3)
private let name = Array("board".utf8)

/// A fresh directory for one test, removed with its files by `cleanUp`.
private func makeDirectory() throws -> String {
    var template = Array("/tmp/piconet-groupjournal-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    try #require(made != nil, "mkdtemp failed: errno \(errno)")
    return String(cString: made!)
}

private func cleanUp(_ dir: String) {
    for n in ["j", "j.tmp", "key"] { unlink(dir + "/" + n) }
    rmdir(dir)
}

private func fileBytes(_ path: String) throws -> [UInt8] {
    let f = try PositionedFile(path: path, readOnly: true)
    defer { f.close() }
    return try f.read(at: 0, count: try f.size())
}

/// Runs a three-member group in memory, member `a` writing its journal to `path` through the
/// file, until `a` has `entries` committed entries; returns a's node.
private func runGroup(journal: GroupJournalFile, commands: Int) throws -> GroupNode<Whiteboard, SeededRandom> {
    var nodes: [MemberID: GroupNode<Whiteboard, SeededRandom>] = [:]
    for (k, m) in [a, b, c].enumerated() {
        nodes[m] = try GroupNode(id: m, members: [a, b, c], random: SeededRandom(seed: UInt64(k + 1)), at: .zero)
    }
    var now = Instant.zero
    var inbox: [(GroupMessage, MemberID, MemberID)] = []
    func carry(_ actions: [GroupAction], of m: MemberID) throws {
        var queue = actions
        var i = 0
        while i < queue.count {
            switch queue[i] {
            case let .send(msg, to): inbox.append((msg, m, to))
            case let .persist(record):
                if m == a { try journal.append(record) }
                queue += nodes[m]!.persisted(at: now)
            default: break
            }
            i += 1
        }
    }
    var proposed = 0
    for _ in 0..<4000 {
        now = now + .milliseconds(5)
        for m in [a, b, c] where nodes[m]!.nextDeadline.map({ $0 <= now }) ?? false {
            try carry(nodes[m]!.timerFired(at: now), of: m)
        }
        let batch = inbox
        inbox = []
        for (msg, from, to) in batch { try carry(nodes[to]!.received(msg, from: from, at: now), of: to) }
        if let leader = [a, b, c].first(where: { nodes[$0]!.role == .leader }), proposed < commands {
            let line = BoardLine(id: UInt64(proposed + 1), author: leader, text: Array("line \(proposed)".utf8))
            let (result, actions) = nodes[leader]!.propose(line.command, at: now)
            if case .accepted = result { proposed += 1 }
            try carry(actions, of: leader)
        }
        if proposed == commands, nodes[a]!.state.entries.count == commands, inbox.isEmpty { break }
    }
    return nodes[a]!
}

@Suite struct GroupJournalFileTests {
    @Test func aRestartFromTheJournalKeepsTermVoteAndCommittedEntries() throws {
        let dir = try makeDirectory()
        defer { cleanUp(dir) }
        let path = dir + "/j"
        let journal = try GroupJournalFile(path: path, group: name, member: a)
        let before = try runGroup(journal: journal, commands: 20)
        #expect(before.state.entries.count == 20)
        journal.close()

        let reopened = try GroupJournalFile(path: path, group: name, member: a)
        #expect(reopened.tornBytes == 0)
        #expect(reopened.storage.term == before.term)
        #expect(reopened.storage.votedFor == before.votedFor)
        let restored = try GroupNode<Whiteboard, SeededRandom>(id: a, members: [a, b, c], restoring: reopened.storage,
                                                              random: SeededRandom(seed: 9), at: .zero)
        #expect(restored.term == before.term)
        // Every committed entry is in the restored log, in order (committed again once a leader says so).
        let stored = reopened.storage.entries.compactMap { BoardLine(command: $0.command) }
        #expect(stored.map(\.id) == Array(1...20))
        reopened.close()
    }

    @Test func aTornLastRecordIsDroppedAndADamagedMiddleOneIsAnError() throws {
        let dir = try makeDirectory()
        defer { cleanUp(dir) }
        let path = dir + "/j"
        let journal = try GroupJournalFile(path: path, group: name, member: a)
        try journal.append(PersistRecord(term: 3, votedFor: b, firstIndex: 1, replaceFrom: 1,
                                         entries: [LogEntry(index: 1, term: 3, command: [1])]))
        try journal.append(PersistRecord(term: 4, votedFor: nil, firstIndex: 1, replaceFrom: 2,
                                         entries: [LogEntry(index: 2, term: 4, command: [2])]))
        let whole = journal.length
        journal.close()
        let bytes = try fileBytes(path)
        #expect(bytes.count == whole)

        // Torn: the last record cut short.
        let f = try PositionedFile(path: path)
        try f.truncate(to: whole - 3)
        f.close()
        let torn = try GroupJournalFile(path: path, group: name, member: a)
        #expect(torn.tornBytes > 0)
        #expect(torn.storage.term == 3 && torn.storage.votedFor == b && torn.storage.entries.count == 1)
        // Appends go after the last good record.
        try torn.append(PersistRecord(term: 5, votedFor: c, firstIndex: 1, replaceFrom: 2))
        torn.close()
        let again = try GroupJournalFile(path: path, group: name, member: a)
        #expect(again.tornBytes == 0 && again.storage.term == 5 && again.storage.votedFor == c)
        again.close()

        // Damaged in the middle, records after it: an error, never an empty start.
        var damaged = bytes
        damaged[damaged.count / 2] ^= 0xFF
        let g = try PositionedFile(path: path)
        try g.truncate(to: 0)
        try g.write(damaged, at: 0)
        g.close()
        #expect(throws: GroupJournalFile.Failure.self) { _ = try GroupJournalFile(path: path, group: name, member: a) }

        // Another member's journal, another group's, and a file that is none.
        let h = try PositionedFile(path: path)
        try h.truncate(to: 0)
        try h.write(bytes, at: 0)
        h.close()
        #expect(throws: GroupJournalFile.Failure.self) { _ = try GroupJournalFile(path: path, group: name, member: b) }
        #expect(throws: GroupJournalFile.Failure.self) { _ = try GroupJournalFile(path: path, group: Array("other".utf8), member: a) }
        let k = try PositionedFile(path: path)
        try k.write(Array("not a journal".utf8), at: 0)
        k.close()
        #expect(throws: GroupJournalFile.Failure.self) { _ = try GroupJournalFile(path: path, group: name, member: a) }
    }

    @Test func aLongJournalIsCompactedToOneRecordOfTheState() throws {
        let dir = try makeDirectory()
        defer { cleanUp(dir) }
        let path = dir + "/j"
        let journal = try GroupJournalFile(path: path, group: name, member: a, compactAfter: 512)
        for i in 1...100 {
            try journal.append(PersistRecord(term: UInt64(i), votedFor: a, firstIndex: 1, replaceFrom: UInt64(i),
                                             entries: [LogEntry(index: UInt64(i), term: UInt64(i), command: [UInt8](repeating: 7, count: 20))]))
        }
        #expect(journal.compactions > 0)
        #expect(journal.length < 4096)
        let expected = journal.storage
        journal.close()
        let reopened = try GroupJournalFile(path: path, group: name, member: a)
        #expect(reopened.storage == expected)
        #expect(reopened.storage.entries.count == 100)
        reopened.close()
    }

    @Test func theSyncLatencyIsMeasuredBesideTheJournalAndLeavesNoFile() throws {
        let dir = try makeDirectory()
        defer { cleanUp(dir) }
        let sync = try GroupJournalFile.syncLatency(nextTo: dir + "/j", samples: 4)
        #expect(sync > .zero && sync < .seconds(10), "\(sync)")
        #expect(access(dir + "/j.sync-probe", F_OK) != 0, "the probe file is removed")
        #expect(throws: GroupJournalFile.Failure.self) { try GroupJournalFile.syncLatency(nextTo: dir + "/absent/j") }
    }

    @Test func aGroupKeyFileIs64HexDigitsAndPrivate() throws {
        let dir = try makeDirectory()
        defer { cleanUp(dir) }
        let path = dir + "/key"
        try GroupKeyFile.create(path)
        let key = try GroupKeyFile.read(path)
        #expect(key.count == 32)
        #expect(throws: GroupKeyFile.Failure.self, "an existing file is kept") { try GroupKeyFile.create(path) }
        chmod(path, 0o644)
        #expect(throws: GroupKeyFile.Failure.self, "readable by others") { _ = try GroupKeyFile.read(path) }
        #expect(throws: GroupKeyFile.Failure.self) { _ = try GroupKeyFile.parse(Array("abcd\n".utf8), path: "k") }
        #expect(throws: GroupKeyFile.Failure.self) { _ = try GroupKeyFile.parse(Array(String(repeating: "zz", count: 32).utf8), path: "k") }
        #expect(try GroupKeyFile.parse(Array((String(repeating: "0a", count: 32) + "\n").utf8), path: "k") == [UInt8](repeating: 10, count: 32))
    }

    @Test func aProofVerifiesOnlyForItsNonceAndItsKeys() {
        let key = [UInt8](repeating: 1, count: 32)
        let nonce = [UInt8](repeating: 2, count: 16)
        let proof = MessageAuthentication.hmacSHA256(key: key, data: GroupKeyProof.input(group: name, nonce: nonce, prover: a, verifier: b))
        func verifies(key k: [UInt8], nonce n: [UInt8], prover: MemberID, verifier: MemberID) -> Bool {
            MessageAuthentication.equal(proof, MessageAuthentication.hmacSHA256(
                key: k, data: GroupKeyProof.input(group: name, nonce: n, prover: prover, verifier: verifier)))
        }
        #expect(verifies(key: key, nonce: nonce, prover: a, verifier: b))
        #expect(!verifies(key: [UInt8](repeating: 3, count: 32), nonce: nonce, prover: a, verifier: b), "another group key")
        #expect(!verifies(key: key, nonce: [UInt8](repeating: 4, count: 16), prover: a, verifier: b), "another session's nonce")
        #expect(!verifies(key: key, nonce: nonce, prover: a, verifier: c), "relayed to a third member")
        #expect(!verifies(key: key, nonce: nonce, prover: c, verifier: b), "claimed by another key")
    }
}
